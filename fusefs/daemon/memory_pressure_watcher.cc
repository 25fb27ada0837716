#include "fusefs/daemon/memory_pressure_watcher.h"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "cache/chunk_buffer_pool.h"

namespace epochfs::fusefs {

namespace {
constexpr double kMiB = 1 << 20;
}

uint64_t MemoryPressurePolicy::nextCap(uint64_t workingSetBytes, uint64_t tierUsedBytes,
                                       uint64_t capBytes) const {
  if (workingSetBytes + marginBytes > limitBytes) {
    // Free 1.5 margins: the tier gives up what is missing (all of the excess
    // when the cgroup is over its limit) plus half a margin.
    const uint64_t need = workingSetBytes + marginBytes + marginBytes / 2 - limitBytes;
    const uint64_t held = std::min(capBytes, tierUsedBytes);
    return held > need ? held - need : 0;
  }
  const uint64_t free = limitBytes - workingSetBytes;
  if (free > 2 * marginBytes && capBytes < tierMaxBytes) {
    // Let the tier grow into what is free beyond two margins.
    const uint64_t room = tierUsedBytes + (free - 2 * marginBytes);
    return std::max(capBytes, std::min(tierMaxBytes, room));
  }
  return capBytes;
}

MemoryPressureWatcher::MemoryPressureWatcher(cache::RamTier& tier, MemoryPressurePolicy policy,
                                             Sampler sample, std::string limitFile,
                                             std::chrono::milliseconds period)
    : tier_(tier),
      policy_(policy),
      sample_(std::move(sample)),
      limitFile_(std::move(limitFile)),
      period_(period),
      cap_(policy.tierMaxBytes),
      lowestCap_(policy.tierMaxBytes) {}

MemoryPressureWatcher::~MemoryPressureWatcher() { stop(); }

void MemoryPressureWatcher::start() {
  thread_.start(period_, [this] { pollOnce(); });
}

void MemoryPressureWatcher::stop() { thread_.stop(); }

void MemoryPressureWatcher::pollOnce() {
  uint64_t ws = 0;
  if (!sample_(&ws)) return;
  workingSet_.store(ws, std::memory_order_relaxed);
  const uint64_t used = tier_.usage().bytesUsed;
  const uint64_t next = policy_.nextCap(ws, used, cap_);
  if (next == cap_) return;
  const bool shrink = next < cap_;
  cap_ = next;
  tier_.setCapacity(cap_);
  const auto now = std::chrono::steady_clock::now();
  if (shrink) {
    shrinks_.fetch_add(1, std::memory_order_relaxed);
    lowestCap_.store(std::min(lowestCap_.load(std::memory_order_relaxed), cap_),
                     std::memory_order_relaxed);
    // Idle chunk buffers go, and the pool keeps none while the tier is capped:
    // else the buffers the shrink just evicted would stay resident in it.
    cache::ChunkBufferPool& pool = cache::ChunkBufferPool::global();
    if (!pressured_) savedPoolLimit_ = pool.idleLimit();
    pool.setIdleLimit(0);
    malloc_trim(0);  // small chunks' freed memory back to the kernel too
    // A warning when the episode starts, then at most one line every 10 s.
    if (!pressured_ || now - lastLog_ >= std::chrono::seconds(10)) {
      spdlog::warn(
          "memory pressure: the cgroup uses {:.1f} MiB of {:.1f} MiB ({}), {:.1f} MiB "
          "kept free; RAM tier capped at {:.1f} MiB (configured {:.1f} MiB) instead of "
          "being OOM-killed",
          ws / kMiB, policy_.limitBytes / kMiB, limitFile_, policy_.marginBytes / kMiB, cap_ / kMiB,
          policy_.tierMaxBytes / kMiB);
      lastLog_ = now;
    }
    pressured_ = true;
  } else if (pressured_ && cap_ >= policy_.tierMaxBytes) {
    spdlog::info(
        "memory pressure gone: RAM tier back at {:.1f} MiB ({} shrinks, lowest {:.1f} MiB)",
        cap_ / kMiB, shrinks(), lowestCapBytes() / kMiB);
    cache::ChunkBufferPool::global().setIdleLimit(savedPoolLimit_);
    pressured_ = false;
  }
}

}  // namespace epochfs::fusefs
