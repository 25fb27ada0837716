// WarmJob: `epochctl warm` on the daemon side. Fetches every chunk of a list
// of files through ChunkCache::get — the read path itself, so chunks land in
// the RAM tier and (write-through) the disk tier exactly as a reader's miss
// would put them there, and a concurrent reader of the same chunk waits for
// the same fetch. `threads` workers keep that many source reads in flight.
// Progress (files, bytes, errors) is polled by the admin connection that
// started the job; the job is cancelled when that connection ends.
// Thread-safety: all methods from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/mutex.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct WarmCounters {  // daemon-wide, for stats and metrics
  std::atomic<uint64_t> jobs{0}, files{0}, bytes{0}, errors{0};
};

class WarmJob {
 public:
  struct Progress {
    uint64_t filesTotal = 0, filesDone = 0;
    uint64_t bytesTotal = 0, bytesDone = 0;
    uint64_t errors = 0;
    std::string firstError;
    double seconds = 0;
    bool done = false;
    bool cancelled = false;
  };

  WarmJob(const DatasetNamespace& ns, cache::ChunkCache& cache, WarmCounters& counters,
          std::vector<DatasetNamespace::Ino> files, unsigned threads);
  ~WarmJob();  // cancels and joins
  WarmJob(const WarmJob&) = delete;
  WarmJob& operator=(const WarmJob&) = delete;

  void start();
  void cancel() { cancel_.store(true); }
  Progress progress() const;

 private:
  void work();

  const DatasetNamespace& ns_;
  cache::ChunkCache& cache_;
  WarmCounters& counters_;
  const std::vector<DatasetNamespace::Ino> files_;
  const unsigned threads_;
  uint64_t bytesTotal_ = 0;
  std::chrono::steady_clock::time_point startedAt_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> filesDone_{0}, bytesDone_{0}, errors_{0};
  std::atomic<unsigned> running_{0};
  std::atomic<bool> cancel_{false};
  std::atomic<int64_t> finishedNs_{0};  // steady-clock ns when the last worker ended
  mutable cache::Mutex errorMu_;
  std::string firstError_ GUARDED_BY(errorMu_);
  std::vector<std::thread> workers_;
};

}  // namespace epochfs::fusefs
