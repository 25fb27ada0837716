// Prefetcher: reads ahead of each reader stream along its registered
// AccessPlan, and advises the RAM tier which chunk is needed farthest in the
// future (EvictionAdvisor, Belady's rule).
//
// - Position tracking comes from the actual reads (onRead): an entry is
//   consumed when a read reaches its last byte, in whatever order several
//   DataLoader workers deliver them; progress = consumed entries.
// - A scheduler thread keeps every stream's prefetch `windowFiles` entries
//   ahead of its progress, with at most `memoryBytes` of prefetch reads in
//   flight; `workers` threads run the fetches (deep queue to the source)
//   through ChunkCache, so a demand read of a chunk being prefetched waits for
//   that fetch instead of reading it again.
// - Peer prefetch: in a cluster, entries whose file another node owns are
//   fetched from the owner into the RAM tier as staged guests
//   (ChunkCache::stage, cache/ram_tier.h), never displacing the own share,
//   and leave once consumed when their next use is beyond the window; the
//   lead is then also bounded by each stream's slice of the staging room.
// - A plan expires when its readers stop following it: no progress for
//   `expirySeconds`, or `deviationReads` reads in a row of files no plan names.
// - Page-cache push (optional, setPagePusher): a prefetched whole-file entry is
//   pushed into the kernel's page cache, so its reads never reach the daemon.
//   Position then comes from opens (positionFromOpens): an open of a pushed
//   entry consumes it; an entry opened before its push is consumed by its
//   reads as before, or by the push if that lands first. Or, with
//   pushSentinelEvery, every Nth entry stays un-pushed and its read sweeps
//   the pushed entries before it.
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/eviction_advisor.h"
#include "prefetch/access_plan.h"
#include "prefetch/page_pusher.h"

namespace epochfs::prefetch {

struct PrefetchOptions {
  unsigned workers = 32;             // outstanding source reads
  uint32_t windowFiles = 512;        // entries ahead of the reader
  uint64_t memoryBytes = 256 << 20;  // prefetch bytes in flight
  // Bytes prefetched ahead of a stream's position (0: no limit). Prefetched,
  // unread data occupies the RAM tier; with the dataset larger than the cache
  // every byte of lead displaces a byte that would have been a hit, so the
  // daemon sets this to a small fraction of the RAM tier.
  uint64_t maxLeadBytes = 0;
  double expirySeconds = 60;
  uint64_t deviationReads = 2000;  // reads (opens with positionFromOpens) off every plan
  // Opens reach the daemon (onOpen): they, not reads alone, track the
  // position, and drive the read observer and deviation counting. Needed
  // when entries are pushed into the page cache (their reads are invisible).
  bool positionFromOpens = false;
  // Sentinels (instead of opens): every Nth entry of a stream is not pushed,
  // so its read reaches the daemon; a read consuming entry p also consumes
  // the pushed entries before p - 2N (slack for out-of-order loader
  // workers). 0: off. Lets opens stay zero-message.
  uint32_t pushSentinelEvery = 0;
};

struct StreamStats {
  int64_t epoch = 0;
  int rank = 0;
  uint64_t length = 0;  // plan entries
  uint64_t start = 0;
  uint64_t position = 0;   // start + consumed entries
  uint64_t leadFiles = 0;  // prefetched or in flight beyond the position
  double leadSeconds = 0;  // leadFiles at the recent consumption rate
  uint64_t consumed = 0;
  uint64_t stalls = 0;  // planned reads that had to wait on the source or a peer
  uint64_t hits = 0;    // planned reads served from a cache tier
  uint64_t prefetchedFiles = 0;
  uint64_t prefetchedBytes = 0;
  bool expired = false;
};

class Prefetcher : public cache::EvictionAdvisor {
 public:
  Prefetcher(const PrefetchOptions& options, cache::ChunkCache& cache);
  ~Prefetcher() override;

  // Installs `plan` for its rank, replacing that rank's previous plan.
  void setPlan(std::shared_ptr<const AccessPlan> plan);
  void clear();

  // A FUSE read of [offset, offset+size) of file `fileId` was served from
  // tier `from` (kSource: it waited on the source).
  void onRead(uint64_t fileId, uint64_t offset, uint64_t size, cache::ChunkCache::Tier from);

  // A planned file was opened (only with options.positionFromOpens). Marks
  // the entry of `fileId` nearest its stream's position as opened; an entry
  // already pushed into the page cache is consumed here (its reads will not
  // come).
  void onOpen(uint64_t fileId);

  // Where prefetched whole-file entries are pushed (null: nowhere). The
  // pusher must outlive the prefetcher or be set to null first.
  void setPagePusher(PagePusher* pusher) { pusher_.store(pusher); }

  // Reads chunks [firstChunk, firstChunk + count) of a file into the cache in
  // the background (sequential read-ahead for large files such as shards),
  // within the in-flight budget; chunks over budget are skipped.
  void readAhead(const std::string& relPath, const cache::FileIdentity& id, uint32_t firstChunk,
                 uint32_t count);

  // Called with the file id of every read that starts at offset 0 (a file
  // being opened and read; with positionFromOpens: of every open), plan or not. Set once, before
  // reads start.
  void setReadObserver(std::function<void(uint64_t fileId)> observer) {
    observer_ = std::move(observer);
  }

  bool active() const override { return live_.load(std::memory_order_relaxed); }
  uint64_t nextUse(const cache::ChunkKey& key) const override;

  std::vector<StreamStats> stats() const;
  uint64_t inflightBytes() const { return inflightBytes_.load(); }
  // Tasks (plan entries and read-ahead chunks) queued or being fetched.
  uint64_t inflightTasks() const { return inflightTasks_.load(); }
  // The most bytes ever in flight at once (at most memoryBytes, or one entry
  // larger than it when nothing else was in flight).
  uint64_t peakInflightBytes() const { return peakInflightBytes_.load(); }
  // Back-off: times the scheduler stopped a stream because the in-flight
  // budget was full, or because the stream's lead reached maxLeadBytes; and
  // read-ahead chunks skipped for a full budget.
  uint64_t budgetWaits() const { return budgetWaits_.load(); }
  uint64_t leadWaits() const { return leadWaits_.load(); }
  uint64_t readAheadSkipped() const { return readAheadSkipped_.load(); }
  uint64_t readAheadChunks() const { return readAheadChunks_.load(); }
  // Page-cache push: entries pushed whole, their bytes, pushes the kernel refused.
  uint64_t pushedFiles() const { return pushedFiles_.load(); }
  uint64_t pushedBytes() const { return pushedBytes_.load(); }
  uint64_t pushFailures() const { return pushFailures_.load(); }
  const PrefetchOptions& options() const { return options_; }

 private:
  struct Stream;
  // A chunk read ahead of a sequential reader (no plan needed).
  struct ReadAheadFile {
    std::string relPath;
    cache::FileIdentity identity;
  };
  // Either a plan entry (stream set) or one read-ahead chunk (file set).
  struct Task {
    std::shared_ptr<Stream> stream;
    uint32_t pos = 0;
    std::shared_ptr<const ReadAheadFile> file;
    uint32_t chunk = 0;
    bool staged = false;  // another node's file: staged as a guest of the RAM tier
  };
  void runReadAhead(const Task& t);
  using Streams = std::vector<std::shared_ptr<Stream>>;

  std::shared_ptr<const Streams> streams() const;
  void schedulerLoop();
  void workerLoop();
  void schedule(Stream& s, const std::shared_ptr<Stream>& ref, size_t streams);
  void expire(const char* why);
  // Marks entry `pos` consumed (idempotent): progress, lead, demotion.
  void consume(Stream& s, uint32_t pos);
  // Sentinel mode: a read consumed entry `pos`; consume the pushed entries
  // far enough before it.
  void sweepPushed(Stream& s, uint32_t pos);
  // Counts a planned (true) or unplanned access for deviation expiry.
  void countDeviation(bool planned);
  // The not yet consumed entry of `fileId` nearest its stream's position,
  // among those `eligible` accepts; null when none. `planned`: some plan
  // names the file.
  std::shared_ptr<Stream> nearestEntry(uint64_t fileId,
                                       const std::function<bool(const Stream&, uint32_t)>& eligible,
                                       uint32_t* pos, bool* planned) const;
  // After a plan entry's chunks were fetched: push them when it is a whole
  // file not yet read.
  void maybePush(Stream& s, uint32_t pos, const std::vector<cache::ChunkRef>& chunks);
  // A consumed entry's chunks become the RAM tier's first eviction candidates.
  void demote(const PlanEntry& e);
  // One consumed chunk: a guest needed beyond the window leaves the RAM tier,
  // anything else is demoted.
  void retire(const cache::ChunkKey& key);
  // Takes `bytes` of the in-flight budget (atomically: FUSE threads reserve
  // read-ahead concurrently with the scheduler). One reservation of any size
  // is allowed when nothing is in flight, so an entry larger than the budget
  // still makes progress. False: the budget is full.
  bool tryReserve(uint64_t bytes);
  void release(uint64_t bytes);

  PrefetchOptions options_;
  cache::ChunkCache& cache_;
  std::function<void(uint64_t)> observer_;
  mutable std::mutex streamsMu_;  // guards streams_ (the pointer; Streams is copy-on-write)
  std::shared_ptr<const Streams> streams_;
  std::atomic<bool> live_{false};
  std::atomic<uint64_t> offPlanStreak_{0};
  std::atomic<uint64_t> inflightBytes_{0};
  std::atomic<uint64_t> inflightTasks_{0};
  std::atomic<uint64_t> peakInflightBytes_{0};
  std::atomic<uint64_t> budgetWaits_{0}, leadWaits_{0}, readAheadSkipped_{0};
  std::atomic<uint64_t> stagingInflight_{0};  // bytes of staged entries being fetched
  std::atomic<uint64_t> readAheadChunks_{0};
  std::atomic<PagePusher*> pusher_{nullptr};
  std::atomic<uint64_t> pushedFiles_{0}, pushedBytes_{0}, pushFailures_{0};

  moodycamel::BlockingConcurrentQueue<Task> tasks_;
  std::mutex schedMu_;  // pairs with schedCv_ to wake the scheduler early
  std::condition_variable schedCv_;
  // Consumed entries per wake of the scheduler (1/32 of the window).
  const uint64_t wakeEvery_;
  // Set when schedule() stopped on the byte budget or the staging area: the
  // next fetch to finish wakes the scheduler.
  std::atomic<bool> wakeOnRelease_{false};
  std::atomic<bool> stopping_{false};
  std::thread scheduler_;
  std::vector<std::thread> workers_;
};

}  // namespace epochfs::prefetch
