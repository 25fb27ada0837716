// FetchWorkers: the threads that run FetchTasks through ChunkCache — a deep
// queue of source (or peer) reads, so a demand read of a chunk being
// prefetched waits for that fetch instead of reading it again. The queue is
// ordered by when each task is needed (FetchTask::needNs), so that with
// several streams (several jobs on one node) each reader's next entries come
// before another's far ones, whichever plan was registered first.
//   - a plan entry: its chunks are read into the cache (another node's file
//     is staged as a guest of the RAM tier, cache/ram_tier.h); a whole file
//     the PositionSource allows is then pushed into the kernel's page cache;
//     a staged entry the reader got to first is retired at once (it would
//     only hold staging room);
//   - a read-ahead chunk: read into the cache.
// Each task's bytes go back to the FetchBudget when it ends, and
// `onReleased` runs (the prefetcher wakes its scheduler if it waits on room).
// Thread-safety: enqueue and the getters from any thread; setPagePusher
// before reads start or with the pusher outliving the workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/mutex.h"
#include "prefetch/fetch_budget.h"
#include "prefetch/fetch_task.h"
#include "prefetch/page_pusher.h"
#include "prefetch/position_source.h"
#include "prefetch/window_scheduler.h"

namespace epochfs::prefetch {

class FetchWorkers {
 public:
  struct Hooks {
    std::function<void(const cache::ChunkKey&)> retire;  // a staged chunk no one will read
    std::function<void()> onReleased;
  };

  FetchWorkers(unsigned threads, cache::ChunkCache& cache, FetchBudget& budget,
               WindowScheduler& scheduler, PositionSource& position, Hooks hooks);
  ~FetchWorkers();  // stops and joins the threads; queued tasks are dropped

  void enqueue(FetchTask task);
  // Where pushable entries go (null: nowhere).
  void setPagePusher(PagePusher* pusher) { pusher_.store(pusher); }

  uint64_t readAheadChunks() const { return readAheadChunks_.load(); }
  uint64_t pushedFiles() const { return pushedFiles_.load(); }
  uint64_t pushedBytes() const { return pushedBytes_.load(); }
  uint64_t pushFailures() const { return pushFailures_.load(); }

 private:
  void loop();
  void runEntry(const FetchTask& t);
  void runReadAhead(const FetchTask& t);
  // After an entry's chunks were fetched: push them when it is a whole file
  // not yet read that the position source lets go to the page cache.
  void maybePush(PlanStream& s, uint32_t pos, const std::vector<cache::ChunkRef>& chunks);

  cache::ChunkCache& cache_;
  FetchBudget& budget_;
  WindowScheduler& scheduler_;
  PositionSource& position_;
  Hooks hooks_;
  std::atomic<PagePusher*> pusher_{nullptr};
  std::atomic<uint64_t> readAheadChunks_{0};
  std::atomic<uint64_t> pushedFiles_{0}, pushedBytes_{0}, pushFailures_{0};
  // Soonest needed first; equal needs in the order queued.
  struct Later {
    bool operator()(const FetchTask& a, const FetchTask& b) const {
      return a.needNs != b.needNs ? a.needNs > b.needNs : a.seq > b.seq;
    }
  };
  cache::Mutex mu_;
  cache::CondVar cv_;  // with mu_: a task was queued, or stopping
  std::priority_queue<FetchTask, std::vector<FetchTask>, Later> tasks_ GUARDED_BY(mu_);
  uint64_t nextSeq_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace epochfs::prefetch
