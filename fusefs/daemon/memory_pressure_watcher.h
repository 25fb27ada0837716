// MemoryPressureWatcher: keeps the daemon's RAM tier from getting it
// OOM-killed. In a memory cgroup (a batch job, a container) the tier shares the
// limit with the daemon's other memory and with the job's own processes and
// their page cache; when they all exceed the limit the kernel first reclaims
// page cache, then kills the largest process — the daemon, whose supervisor
// restarts it with an empty tier (measured on the lab: every node's daemon
// killed once per epoch at 1.5·D/p of memory, docs/LAB.md).
//
// The watcher samples the limiting cgroup's working set (usage less inactive
// page cache, memory_limit.h readCgroupWorkingSet) every `period`; when less
// than `margin` of the limit is left it caps the tier below what it holds
// (RamTier::setCapacity: guests go first, then owned chunks) so that 1.5 ×
// margin is free again; when more than 2 × margin is free it lets the tier grow
// back, up to its configured size. Each change is logged (a warning when the
// tier first shrinks, info when it is whole again) and counted: shrinks(),
// lowestCapBytes() and the last working set are `stats.memory.pressure`
// (docs/METRICS.md); the cap itself is the tier's `capacity_bytes`. While the
// tier is capped the chunk-buffer pool (cache/chunk_buffer_pool.h) keeps
// nothing idle: its limit is 0 from the first shrink until the tier is whole
// again, else the buffers the shrink evicts would stay resident in it.
//
// Thread-safety: start()/stop() from one thread; the policy and pollOnce() are
// for tests and the watcher's own thread; the figures may be read from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cache/ram_tier.h"
#include "fusefs/daemon/periodic_thread.h"

namespace epochfs::fusefs {

// The decision, without I/O.
struct MemoryPressurePolicy {
  uint64_t limitBytes = 0;    // the cgroup's limit
  uint64_t tierMaxBytes = 0;  // the tier's configured size (owned + guests' extra)
  uint64_t marginBytes = 0;   // kept free of the limit

  // The tier's next cap, given the cgroup's working set, the tier's bytes in
  // use and its cap now.
  uint64_t nextCap(uint64_t workingSetBytes, uint64_t tierUsedBytes, uint64_t capBytes) const;
};

class MemoryPressureWatcher {
 public:
  // Reads the cgroup's working set; false if unreadable (the sample is skipped).
  using Sampler = std::function<bool(uint64_t* workingSetBytes)>;

  MemoryPressureWatcher(cache::RamTier& tier, MemoryPressurePolicy policy, Sampler sample,
                        std::string limitFile,
                        std::chrono::milliseconds period = std::chrono::milliseconds(50));
  ~MemoryPressureWatcher();
  MemoryPressureWatcher(const MemoryPressureWatcher&) = delete;
  MemoryPressureWatcher& operator=(const MemoryPressureWatcher&) = delete;

  void start();
  void stop();
  // One sample and decision (the thread's loop body).
  void pollOnce();

  // Times the tier was capped lower; the lowest cap so far; the cgroup's
  // working set at the last readable sample (0 before one).
  uint64_t shrinks() const { return shrinks_.load(std::memory_order_relaxed); }
  uint64_t lowestCapBytes() const { return lowestCap_.load(std::memory_order_relaxed); }
  uint64_t workingSetBytes() const { return workingSet_.load(std::memory_order_relaxed); }

 private:
  cache::RamTier& tier_;
  const MemoryPressurePolicy policy_;
  const Sampler sample_;
  const std::string limitFile_;
  const std::chrono::milliseconds period_;
  uint64_t cap_;
  std::atomic<uint64_t> shrinks_{0};
  std::atomic<uint64_t> lowestCap_;
  std::atomic<uint64_t> workingSet_{0};
  bool pressured_ = false;     // capped below tierMaxBytes since the last warning
  size_t savedPoolLimit_ = 0;  // the chunk-buffer pool's limit before the episode
  std::chrono::steady_clock::time_point lastLog_{};
  PeriodicThread thread_;
};

}  // namespace epochfs::fusefs
