// Prefetcher: reads ahead of each reader stream along its registered
// AccessPlan, and advises the RAM tier which chunk is needed farthest in the
// future (EvictionAdvisor, Belady's rule). It composes four parts, each its
// own file pair (docs/PREFETCH.md):
//   PlanTracker      the plans (a PlanStream per rank), which entry an access
//                    belongs to, next use; plans expire when readers leave them
//                    (`deviationReads` accesses off every plan) or stop
//                    (no progress for `expirySeconds`);
//   PositionSource   how positions are learnt: from reads, from opens (with
//                    page-cache push) or from sentinel reads — one, chosen by
//                    PrefetchOptions::position;
//   WindowScheduler  which entries to fetch next (window, lead cap, staging
//                    room for other nodes' files, FetchBudget);
//   FetchWorkers     the threads that fetch (stage, push) them.
// The prefetcher itself owns the scheduler thread (a pass every 20 ms, or
// when consumption or a freed budget asks), consumption (a consumed entry's
// chunks become the RAM tier's first eviction candidates; a guest needed
// beyond the window leaves at once) and sequential read-ahead.
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/eviction_advisor.h"
#include "cache/mutex.h"
#include "prefetch/access_plan.h"
#include "prefetch/fetch_budget.h"
#include "prefetch/fetch_workers.h"
#include "prefetch/page_pusher.h"
#include "prefetch/plan_stream.h"
#include "prefetch/plan_tracker.h"
#include "prefetch/position_source.h"
#include "prefetch/prefetch_options.h"
#include "prefetch/window_scheduler.h"

namespace epochfs::prefetch {

class Prefetcher : public cache::EvictionAdvisor {
 public:
  Prefetcher(const PrefetchOptions& options, cache::ChunkCache& cache);
  ~Prefetcher() override;

  // Installs `plan` for its job and rank, replacing that job's rank's
  // previous plan.
  void setPlan(std::shared_ptr<const AccessPlan> plan);
  // Ends every plan (`job`: that job's only).
  void clear(std::optional<uint32_t> job = std::nullopt);

  // A FUSE read of [offset, offset+size) of file `fileId`, through the mount
  // of `job` (AccessPlan::job), was served from tier `from` (kSource: it
  // waited on the source).
  void onRead(uint64_t fileId, uint64_t offset, uint64_t size, cache::ChunkCache::Tier from,
              uint32_t job = 0);

  // A file was opened (it counts with PositionMode::kOpens only). Marks the
  // entry of `fileId` nearest its stream's position as opened; an entry
  // already pushed into the page cache is consumed here (its reads will not
  // come).
  void onOpen(uint64_t fileId, uint32_t job = 0) { position_->onOpen(fileId, job); }

  // Where prefetched whole-file entries are pushed (null: nowhere; with
  // PositionMode::kReads nothing is pushed). The pusher must outlive the
  // prefetcher or be set to null first.
  void setPagePusher(PagePusher* pusher) { workers_->setPagePusher(pusher); }

  // Reads chunks [firstChunk, firstChunk + count) of a file into the cache in
  // the background (sequential read-ahead for large files such as shards),
  // within the in-flight budget; chunks over budget are skipped.
  void readAhead(const std::string& relPath, const cache::FileIdentity& id, uint32_t firstChunk,
                 uint32_t count);

  // Called with the file id and job (mount) of every read that starts at
  // offset 0 (a file being opened and read; with PositionMode::kOpens: of
  // every open), plan or not. Set once, before reads start.
  void setReadObserver(std::function<void(uint64_t fileId, uint32_t job)> observer) {
    observer_ = std::move(observer);
  }

  bool active() const override { return tracker_.live(); }
  uint64_t nextUseNs(const cache::ChunkKey& key) const override {
    return tracker_.nextUseNs(key.fileId);
  }
  // Entries until `key`'s next use from the nearest stream's progress.
  uint64_t nextUse(const cache::ChunkKey& key) const { return tracker_.nextUse(key.fileId); }

  std::vector<StreamStats> stats() const { return tracker_.stats(); }
  uint64_t inflightBytes() const { return budget_.bytes(); }
  // Tasks (plan entries and read-ahead chunks) queued or being fetched.
  uint64_t inflightTasks() const { return budget_.tasks(); }
  // The most bytes ever in flight at once (at most memoryBytes, or one entry
  // larger than it when nothing else was in flight).
  uint64_t peakInflightBytes() const { return budget_.peak(); }
  // Back-off: times the scheduler stopped a stream because the in-flight
  // budget was full, or because the stream's lead reached maxLeadBytes; and
  // read-ahead chunks skipped for a full budget.
  uint64_t budgetWaits() const { return window_.budgetWaits(); }
  uint64_t leadWaits() const { return window_.leadWaits(); }
  uint64_t readAheadSkipped() const { return readAheadSkipped_.load(); }
  uint64_t readAheadChunks() const { return workers_->readAheadChunks(); }
  // Page-cache push: entries pushed whole, their bytes, pushes the kernel refused.
  uint64_t pushedFiles() const { return workers_->pushedFiles(); }
  uint64_t pushedBytes() const { return workers_->pushedBytes(); }
  uint64_t pushFailures() const { return workers_->pushFailures(); }
  const PrefetchOptions& options() const { return options_; }
  // How positions are learnt; FuseServer asks it whether opens must reach the daemon.
  const PositionSource& position() const { return *position_; }

  // Waits until the prefetcher is idle or `timeout` passed; true when idle:
  // nothing queued or being fetched, and a whole scheduler pass that began
  // after that found nothing to fetch. Its state then changes only with reads
  // or plans (for tests that check what was not fetched).
  bool waitIdle(std::chrono::milliseconds timeout);

 private:
  // Entries one stream may queue before the next stream's turn in a pass.
  static constexpr uint32_t kFillSlice = 8;
  void schedulerLoop();
  // Entry `pos` of `s` is done: its chunks are retired, and every
  // wakeEvery_ entries the scheduler wakes to move the window.
  void consume(PlanStream& s, uint32_t pos);
  // One consumed chunk: a guest needed beyond the window leaves the RAM tier,
  // anything else is demoted.
  void retire(const cache::ChunkKey& key);
  void expire(const char* why, uint32_t job);

  const PrefetchOptions options_;
  cache::ChunkCache& cache_;
  std::function<void(uint64_t, uint32_t)> observer_;
  PlanTracker tracker_;
  std::unique_ptr<PositionSource> position_;
  FetchBudget budget_;
  WindowScheduler window_;
  std::atomic<uint64_t> readAheadSkipped_{0};
  std::unique_ptr<FetchWorkers> workers_;  // after what its threads use

  cache::Mutex schedMu_;  // guards nothing: pairs with schedCv_ to wake the scheduler early
  cache::CondVar schedCv_;
  std::atomic<uint64_t> enqueued_{0};  // tasks the scheduler handed to the workers
  cache::Mutex passMu_;
  cache::CondVar passCv_;                    // passes_ grew (waitIdle)
  uint64_t passes_ GUARDED_BY(passMu_) = 0;  // scheduler passes completed
  // Consumed entries per wake of the scheduler (1/32 of the window).
  const uint64_t wakeEvery_;
  std::atomic<bool> stopping_{false};
  std::thread scheduler_;
};

}  // namespace epochfs::prefetch
