#include "prefetch/torch_order_jobs.h"

#include <spdlog/spdlog.h>

namespace epochfs::prefetch {

TorchOrderJobs::TorchOrderJobs(Prefetcher& prefetcher, ListSamples list)
    : prefetcher_(prefetcher), list_(std::move(list)) {}

TorchOrderJobs::~TorchOrderJobs() {
  if (listing_.joinable()) listing_.join();
  std::map<uint32_t, std::unique_ptr<TorchOrderFollower>> gone;
  cache::MutexLock lock(mu_);
  gone.swap(followers_);
  following_.store(false);
}

void TorchOrderJobs::follow(uint32_t job, const TorchOrderSpec& spec) {
  std::unique_ptr<TorchOrderFollower> replaced;
  cache::MutexLock lock(mu_);
  if (auto it = followers_.find(job); it != followers_.end()) {
    replaced = std::move(it->second);
    followers_.erase(it);
    following_.store(!followers_.empty());
  }
  if (samples_) {
    startLocked(job, spec);
    return;
  }
  if (listingFailed_) return;  // said once, by list()
  std::erase_if(pending_, [job](const auto& p) { return p.first == job; });
  pending_.emplace_back(job, spec);
  if (!listingStarted_) {
    listingStarted_ = true;
    listing_ = std::thread([this] { list(); });
  }
}

void TorchOrderJobs::end(uint32_t job) {
  std::unique_ptr<TorchOrderFollower> gone;  // joins its thread after the lock
  cache::MutexLock lock(mu_);
  std::erase_if(pending_, [job](const auto& p) { return p.first == job; });
  if (auto it = followers_.find(job); it != followers_.end()) {
    gone = std::move(it->second);
    followers_.erase(it);
  }
  following_.store(!followers_.empty());
}

void TorchOrderJobs::onRead(uint64_t fileId, uint32_t job) {
  if (!following_.load(std::memory_order_relaxed)) return;
  cache::MutexLock lock(mu_);
  if (auto it = followers_.find(job); it != followers_.end()) it->second->onRead(fileId);
}

std::optional<int64_t> TorchOrderJobs::epoch(uint32_t job) const {
  cache::MutexLock lock(mu_);
  if (auto it = followers_.find(job); it != followers_.end()) return it->second->epoch();
  for (const auto& p : pending_) {
    if (p.first == job) return -1;
  }
  return std::nullopt;
}

bool TorchOrderJobs::any() const {
  cache::MutexLock lock(mu_);
  return !followers_.empty() || !pending_.empty();
}

bool TorchOrderJobs::listed() const {
  cache::MutexLock lock(mu_);
  return samples_ != nullptr;
}

void TorchOrderJobs::list() {
  std::optional<TorchSamples> listed = list_();
  cache::MutexLock lock(mu_);
  if (!listed) {
    listingFailed_ = true;
    pending_.clear();
    return;
  }
  samples_ = std::make_shared<const TorchSamples>(std::move(*listed));
  for (const auto& [job, spec] : pending_) startLocked(job, spec);
  pending_.clear();
}

void TorchOrderJobs::startLocked(uint32_t job, const TorchOrderSpec& spec) {
  followers_[job] = std::make_unique<TorchOrderFollower>(spec, samples_, prefetcher_, job);
  following_.store(true);
  spdlog::info("mount {}: follows torch's order (seed {}, world {}, {} rank(s))", job, spec.seed,
               spec.world, spec.ranks.size());
}

}  // namespace epochfs::prefetch
