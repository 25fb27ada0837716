// WindowScheduler: which entries of a stream to fetch next. Keeps each
// stream `windowFiles` entries ahead of its reader, and stops earlier at:
//   - the lead cap (maxLeadBytes of entries past the reader: prefetched,
//     unread data displaces what would be hits when the cache is small);
//   - in a cluster, half the stream's slice of the staging room for other
//     nodes' files (the other half is for entries loader workers have read
//     past without the position getting there yet), and the room actually
//     free in the staging area: a chunk refused there is network wasted;
//   - the FetchBudget: when it is full, the next fetch to finish asks for a
//     new pass (takeWakeRequest).
// The tasks go to `enqueue`; no threads here (the prefetcher's scheduler
// thread calls fill, so a test can call it directly).
// Thread-safety: fill from one thread; stagedDone and takeWakeRequest from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "cache/chunk_cache.h"
#include "prefetch/fetch_budget.h"
#include "prefetch/fetch_task.h"
#include "prefetch/plan_stream.h"

namespace epochfs::prefetch {

class WindowScheduler {
 public:
  struct Limits {
    uint32_t windowFiles = 512;
    uint64_t maxLeadBytes = 0;  // 0: no cap
  };

  WindowScheduler(Limits limits, cache::ChunkCache& cache, FetchBudget& budget,
                  std::function<void(FetchTask)> enqueue)
      : limits_(limits), cache_(cache), budget_(budget), enqueue_(std::move(enqueue)) {}

  // Queues `stream`'s next entries, at most `maxIssue` of them; `streams`:
  // how many share the staging room. Returns how many it queued.
  uint32_t fill(const std::shared_ptr<PlanStream>& stream, size_t streams,
                uint32_t maxIssue = UINT32_MAX);

  // A staged entry of `bytes` finished (fetched or dropped).
  void stagedDone(uint64_t bytes) { stagingInflight_.fetch_sub(bytes); }
  // True once after fill stopped on the budget or the staging room: the
  // caller that just freed room wakes the scheduler.
  bool takeWakeRequest() { return wakeOnRelease_.exchange(false); }

  uint64_t budgetWaits() const { return budgetWaits_.load(); }
  uint64_t leadWaits() const { return leadWaits_.load(); }

 private:
  const Limits limits_;
  cache::ChunkCache& cache_;
  FetchBudget& budget_;
  std::function<void(FetchTask)> enqueue_;
  std::atomic<uint64_t> stagingInflight_{0};  // bytes of staged entries being fetched
  std::atomic<bool> wakeOnRelease_{false};
  std::atomic<uint64_t> budgetWaits_{0}, leadWaits_{0};
};

}  // namespace epochfs::prefetch
