#include "prefetch/torch_order_follower.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>

#include "prefetch/torch_permutation.h"

namespace epochfs::prefetch {

TorchOrderFollower::TorchOrderFollower(const TorchOrderSpec& spec,
                                       std::shared_ptr<const TorchSamples> samples,
                                       Prefetcher& prefetcher, uint32_t job)
    : spec_(spec),
      samplesOwner_(std::move(samples)),
      samples_(*samplesOwner_),
      job_(job),
      prefetcher_(prefetcher) {
  sampleOf_.reserve(samples_.size());
  for (size_t i = 0; i < samples_.size(); ++i) {
    if (samples_[i]) sampleOf_.emplace(samples_[i]->identity.fileId, static_cast<int64_t>(i));
  }
  readThisEpoch_.assign(samples_.size(), 0);
  thread_ = std::thread([this] { run(); });
}

TorchOrderFollower::~TorchOrderFollower() {
  stopping_.store(true);
  thread_.join();
}

std::vector<int64_t> TorchOrderFollower::rankOrder(int64_t epoch, int rank) const {
  return distributedSamplerIndices(static_cast<int64_t>(samples_.size()), spec_.world, rank,
                                   spec_.seed, epoch, true, spec_.dropLast);
}

int64_t TorchOrderFollower::detectEpoch(const std::vector<int64_t>& sampleIndexes,
                                        int64_t preferred) const {
  // Score = sum over the reads of their earliest position in any local rank's
  // order; the true epoch puts the first reads at the front.
  const int64_t n = static_cast<int64_t>(samples_.size());
  int64_t best = preferred < 0 ? 0 : preferred;
  double bestScore = std::numeric_limits<double>::max();
  auto scoreOf = [&](int64_t e) {
    std::vector<int64_t> pos(samples_.size(), n);
    for (int r : spec_.ranks) {
      auto order = rankOrder(e, r);
      for (size_t i = 0; i < order.size(); ++i) {
        pos[order[i]] = std::min<int64_t>(pos[order[i]], static_cast<int64_t>(i));
      }
    }
    double s = 0;
    for (int64_t idx : sampleIndexes) s += static_cast<double>(pos[idx]);
    return s;
  };
  std::vector<int64_t> candidates;
  if (preferred >= 0) candidates.push_back(preferred);
  for (int64_t e = 0; e < spec_.maxEpochSearch; ++e) {
    if (e != preferred) candidates.push_back(e);
  }
  // A near-perfect score (the reads at the very front of the order: k reads
  // at an average position of at most k/2) ends the search early.
  const double k = static_cast<double>(sampleIndexes.size());
  const double good = k * k / 2;
  for (int64_t e : candidates) {
    const double s = scoreOf(e);
    if (s < bestScore) bestScore = s, best = e;
    if (bestScore <= good) break;
  }
  return best;
}

void TorchOrderFollower::startEpoch(int64_t epoch, const std::vector<int64_t>& alreadyRead) {
  readThisEpoch_.assign(samples_.size(), 0);
  for (int r : spec_.ranks) {
    // This epoch's order followed by the next one's (set_epoch(e + 1) is what
    // training does next): near the end of the epoch the prefetcher is already
    // fetching the next epoch's first samples, so the reads before the new
    // epoch is detected find their data on the node too. A file read in both
    // epochs is consumed at its first unconsumed position, so the halves stay
    // in step with the reads.
    std::vector<PlanEntry> entries;
    std::vector<uint8_t> skip(samples_.size(), 0);
    for (int64_t idx : alreadyRead) skip[idx] = 1;
    for (int64_t e : {epoch, epoch + 1}) {
      for (int64_t idx : rankOrder(e, r)) {
        if (e == epoch && skip[idx]) {
          skip[idx] = 0;  // its first occurrence only (padding may repeat it)
          continue;
        }
        if (samples_[idx]) entries.push_back(*samples_[idx]);
      }
    }
    prefetcher_.setPlan(std::make_shared<const AccessPlan>(epoch, r, 0, std::move(entries), job_));
  }
  epoch_.store(epoch);  // once its plans are set: epoch() names plans that are there
  spdlog::info("torch order: mount {} follows epoch {} for {} rank(s)", job_, epoch,
               spec_.ranks.size());
}

void TorchOrderFollower::drainInto(std::vector<int64_t>& reads) {
  // The reads queued while the epoch was being detected have been consumed
  // against the previous plan already; the new plan must not fetch them again.
  uint64_t ids[256];
  while (size_t n = reads_.try_dequeue_bulk(ids, 256)) {
    for (size_t i = 0; i < n; ++i) {
      auto it = sampleOf_.find(ids[i]);
      if (it != sampleOf_.end()) reads.push_back(it->second);
    }
  }
}

void TorchOrderFollower::run() {
  std::vector<int64_t> first;    // sample reads before the epoch is known
  std::vector<int64_t> repeats;  // samples read again: a new epoch began
  size_t sinceRepeat = 0;
  uint64_t ids[256];
  while (!stopping_.load()) {
    size_t n = reads_.try_dequeue_bulk(ids, 256);
    if (n == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      auto it = sampleOf_.find(ids[i]);
      if (it == sampleOf_.end()) continue;
      const int64_t idx = it->second;
      if (epoch_.load() < 0) {
        first.push_back(idx);
        if (first.size() >= kDetectReads) {
          const int64_t e = detectEpoch(first, -1);
          drainInto(first);
          startEpoch(e, first);
          for (int64_t f : first) readThisEpoch_[f] = 1;
          first.clear();
        }
        continue;
      }
      if (!readThisEpoch_[idx]) {
        readThisEpoch_[idx] = 1;
        // Stray repeats (another reader, padding) fade out.
        if (!repeats.empty() && ++sinceRepeat > 4 * kDetectReads) repeats.clear();
        continue;
      }
      sinceRepeat = 0;
      // DistributedSampler's padding repeats a few samples; a run of repeats
      // means the next epoch started.
      repeats.push_back(idx);
      if (repeats.size() >= kDetectReads) {
        const int64_t next = detectEpoch(repeats, epoch_.load() + 1);
        drainInto(repeats);
        startEpoch(next, repeats);
        for (int64_t r : repeats) readThisEpoch_[r] = 1;
        repeats.clear();
      }
    }
  }
}

}  // namespace epochfs::prefetch
