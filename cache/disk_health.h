// DiskHealth: whether the disk tier may be used, and why not. The tier reports
// every I/O outcome here: an error (EIO, ENOSPC, a segment that cannot be
// created) or a timeout (an operation that did not finish within the tier's
// deadline: a stalled disk). `errorsBeforeUnhealthy` consecutive read errors
// (or write errors), or a
// single timeout, make the tier unhealthy: lookups miss and inserts are refused
// without touching the disk, so reads go to the source. A prober (DiskTier)
// then checks the disk periodically and calls markHealthy() when a probe
// passes.
//
// Thread-safety: all methods may be called from any thread (atomics, relaxed;
// the counters are statistics, `healthy` is a hint read on every I/O;
// lastError under a mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cache/mutex.h"

namespace epochfs::cache {

struct DiskHealthStats {
  bool healthy = true;
  uint64_t readErrors = 0;       // segment reads that failed (EIO, short read)
  uint64_t writeErrors = 0;      // appends / segment creations that failed
  uint64_t timeouts = 0;         // operations that missed the deadline
  uint64_t skipped = 0;          // lookups and inserts not tried while unhealthy
  uint64_t unhealthyEvents = 0;  // healthy -> unhealthy transitions
  uint64_t probes = 0;           // probes run while unhealthy
  uint64_t probeFailures = 0;
  std::string lastError;  // why it last went unhealthy ("" if never)
};

class DiskHealth {
 public:
  explicit DiskHealth(int errorsBeforeUnhealthy) : errorsBeforeUnhealthy_(errorsBeforeUnhealthy) {}

  bool healthy() const { return healthy_.load(std::memory_order_relaxed); }

  // Read and write errors are counted in separate streaks: a tier whose
  // writes fail goes unhealthy even if its reads still work in between.
  void noteReadSuccess() { consecutiveReadErrors_.store(0, std::memory_order_relaxed); }
  void noteWriteSuccess() { consecutiveWriteErrors_.store(0, std::memory_order_relaxed); }
  void noteReadError(const std::string& why) {
    noteError(readErrors_, consecutiveReadErrors_, why);
  }
  void noteWriteError(const std::string& why) {
    noteError(writeErrors_, consecutiveWriteErrors_, why);
  }
  void noteTimeout(const std::string& why);
  void noteSkipped() { skipped_.fetch_add(1, std::memory_order_relaxed); }
  void noteProbe(bool passed);
  // Back in use (a probe passed). Returns true if it was unhealthy.
  bool markHealthy();
  // Out of use now (e.g. the directory vanished).
  void markUnhealthy(const std::string& why);

  DiskHealthStats stats() const;

 private:
  void noteError(std::atomic<uint64_t>& counter, std::atomic<int>& streak, const std::string& why);

  const int errorsBeforeUnhealthy_;
  std::atomic<bool> healthy_{true};
  std::atomic<int> consecutiveReadErrors_{0}, consecutiveWriteErrors_{0};
  std::atomic<uint64_t> readErrors_{0}, writeErrors_{0}, timeouts_{0}, skipped_{0},
      unhealthyEvents_{0}, probes_{0}, probeFailures_{0};
  mutable Mutex lastErrorMu_;
  std::string lastError_ GUARDED_BY(lastErrorMu_);
};

}  // namespace epochfs::cache
