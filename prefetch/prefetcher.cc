#include "prefetch/prefetcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "cache/steady_clock.h"

namespace epochfs::prefetch {

Prefetcher::Prefetcher(const PrefetchOptions& options, cache::ChunkCache& cache)
    : options_(options),
      cache_(cache),
      tracker_(options.deviationReads),
      position_(PositionSource::make(
          options.position, options.sentinelEvery, tracker_,
          {[this](PlanStream& s, uint32_t pos) { consume(s, pos); },
           [this](uint64_t fileId, uint32_t job) {
             if (observer_) observer_(fileId, job);
           },
           [this](uint32_t job) { expire("readers left the plan", job); }, cache::steadyNowNs})),
      budget_(options.memoryBytes),
      window_({options.windowFiles, options.maxLeadBytes}, cache, budget_,
              [this](FetchTask t) {
                enqueued_.fetch_add(1, std::memory_order_relaxed);
                workers_->enqueue(std::move(t));
              }),
      wakeEvery_(std::max<uint64_t>(1, options.windowFiles / 32)) {
  workers_ = std::make_unique<FetchWorkers>(
      options.workers, cache, budget_, window_, *position_,
      FetchWorkers::Hooks{[this](const cache::ChunkKey& key) { retire(key); },
                          [this] {
                            if (window_.takeWakeRequest()) schedCv_.notifyOne();
                          }});
  scheduler_ = std::thread([this] { schedulerLoop(); });
}

Prefetcher::~Prefetcher() {
  stopping_.store(true);
  schedCv_.notifyAll();
  scheduler_.join();
  workers_.reset();
}

void Prefetcher::setPlan(std::shared_ptr<const AccessPlan> plan) {
  auto stream = tracker_.set(std::move(plan), cache::steadyNowNs());
  spdlog::info("prefetch: plan for rank {} epoch {}: {} entries from position {}",
               stream->plan().rank(), stream->plan().epoch(), stream->plan().size(),
               stream->plan().start());
  schedCv_.notifyAll();
}

void Prefetcher::clear(std::optional<uint32_t> job) { tracker_.clear(job); }

void Prefetcher::expire(const char* why, uint32_t job) {
  spdlog::info("prefetch: plans of job {} expired ({})", job, why);
  clear(job);
}

void Prefetcher::onRead(uint64_t fileId, uint64_t offset, uint64_t size,
                        cache::ChunkCache::Tier from, uint32_t job) {
  // Waiting on the network or the source is a stall; RAM, staging, disk are hits.
  position_->onRead(fileId, offset, size, from >= cache::ChunkCache::Tier::kPeer, job);
}

void Prefetcher::retire(const cache::ChunkKey& key) {
  // A guest (another node's chunk) whose next use lies beyond the window
  // leaves at once: until then it would only hold room. Everything else
  // becomes the first to go of its class. (Ownership first: it is cheaper
  // than the next-use scan, and owned chunks are only demoted anyway.)
  if (cache_.ownedElsewhere(key.fileId) && nextUse(key) > options_.windowFiles) {
    cache_.ram().release(key);
  } else {
    cache_.ram().demote(key);
  }
}

void Prefetcher::consume(PlanStream& s, uint32_t pos) {
  const uint64_t consumed = s.consume(pos);
  if (consumed == 0) return;  // already
  const PlanEntry& e = s.plan().at(pos);
  const ChunkSpan span = chunkSpan(e, cache_.chunkSize());
  for (uint32_t index = span.first; index < span.end; ++index) {
    retire(cache_.keyFor(e.identity.fileId, index));
  }
  // The window moved by one entry. Waking the scheduler for each costs two
  // context switches per file; a batch of wakeEvery_ keeps the lead within
  // a few percent of its bound (and the scheduler's 20 ms tick catches up).
  if (consumed % wakeEvery_ == 0) schedCv_.notifyOne();
}

void Prefetcher::schedulerLoop() {
  while (!stopping_.load()) {
    {
      cache::MutexLock lock(schedMu_);
      schedCv_.waitFor(schedMu_, std::chrono::milliseconds(20));
    }
    auto all = tracker_.streams();
    const int64_t now = cache::steadyNowNs();
    std::vector<std::shared_ptr<PlanStream>> live;
    for (const auto& s : *all) {
      if (s->expired()) continue;
      s->updateRate(now);
      if (s->idleLongerThan(now, options_.expirySeconds)) {
        // This plan only: other ranks' readers may still be following theirs.
        spdlog::info("prefetch: plan for rank {} epoch {} expired (no progress)", s->plan().rank(),
                     s->plan().epoch());
        tracker_.remove(s);
        continue;
      }
      live.push_back(s);
    }
    // Round robin, a slice per stream: every reader's next entries are
    // queued before any one's far ones (the fetch queue is first in, first
    // out; several jobs on one node each have their own streams).
    for (bool queued = true; queued && !stopping_.load();) {
      queued = false;
      for (const auto& s : live) {
        if (window_.fill(s, all->size(), kFillSlice) > 0) queued = true;
      }
    }
    {
      cache::MutexLock lock(passMu_);
      ++passes_;
    }
    passCv_.notifyAll();
  }
}

bool Prefetcher::waitIdle(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  cache::MutexLock lock(passMu_);
  for (;;) {
    const uint64_t enqueued = enqueued_.load(), passes = passes_;
    const bool quiet = budget_.tasks() == 0;
    schedCv_.notifyAll();  // no need to wait for the 20 ms tick
    // passes + 1 may have begun before this look; passes + 2 began after it.
    if (!passCv_.waitUntil(passMu_, deadline,
                           [&]() REQUIRES(passMu_) { return passes_ >= passes + 2; })) {
      return false;
    }
    if (quiet && enqueued_.load() == enqueued && budget_.tasks() == 0) return true;
  }
}

void Prefetcher::readAhead(const std::string& relPath, const cache::FileIdentity& id,
                           uint32_t firstChunk, uint32_t count) {
  auto file = std::make_shared<const ReadAheadFile>(ReadAheadFile{relPath, id});
  const uint64_t cs = cache_.chunkSize();
  for (uint32_t c = firstChunk; c < firstChunk + count; ++c) {
    if (uint64_t{c} * cs >= id.size) break;
    if (cache_.ram().contains(cache_.keyFor(id.fileId, c))) continue;
    if (!budget_.tryReserve(cs)) {
      const uint64_t fileChunks = (id.size + cs - 1) / cs;
      readAheadSkipped_.fetch_add(std::min<uint64_t>(firstChunk + count, fileChunks) - c,
                                  std::memory_order_relaxed);
      break;
    }
    FetchTask t;
    t.file = file;
    t.chunk = c;
    t.needNs = cache::steadyNowNs();
    workers_->enqueue(std::move(t));
  }
}

}  // namespace epochfs::prefetch
