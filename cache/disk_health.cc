#include "cache/disk_health.h"

#include <spdlog/spdlog.h>

namespace epochfs::cache {

void DiskHealth::noteError(std::atomic<uint64_t>& counter, std::atomic<int>& streak,
                           const std::string& why) {
  counter.fetch_add(1, std::memory_order_relaxed);
  const int n = streak.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n >= errorsBeforeUnhealthy_) {
    markUnhealthy(std::to_string(n) + " I/O errors in a row, last: " + why);
  }
}

void DiskHealth::noteTimeout(const std::string& why) {
  timeouts_.fetch_add(1, std::memory_order_relaxed);
  markUnhealthy(why);
}

void DiskHealth::noteProbe(bool passed) {
  probes_.fetch_add(1, std::memory_order_relaxed);
  if (!passed) probeFailures_.fetch_add(1, std::memory_order_relaxed);
}

void DiskHealth::markUnhealthy(const std::string& why) {
  {
    MutexLock lock(lastErrorMu_);
    lastError_ = why;
  }
  if (healthy_.exchange(false, std::memory_order_relaxed)) {
    unhealthyEvents_.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("disk tier unhealthy ({}); reads go to the source until a probe passes", why);
  }
}

bool DiskHealth::markHealthy() {
  consecutiveReadErrors_.store(0, std::memory_order_relaxed);
  consecutiveWriteErrors_.store(0, std::memory_order_relaxed);
  const bool was = !healthy_.exchange(true, std::memory_order_relaxed);
  if (was) spdlog::warn("disk tier healthy again (probe passed); back in use");
  return was;
}

DiskHealthStats DiskHealth::stats() const {
  DiskHealthStats s;
  s.healthy = healthy();
  s.readErrors = readErrors_.load(std::memory_order_relaxed);
  s.writeErrors = writeErrors_.load(std::memory_order_relaxed);
  s.timeouts = timeouts_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.unhealthyEvents = unhealthyEvents_.load(std::memory_order_relaxed);
  s.probes = probes_.load(std::memory_order_relaxed);
  s.probeFailures = probeFailures_.load(std::memory_order_relaxed);
  MutexLock lock(lastErrorMu_);
  s.lastError = lastError_;
  return s;
}

}  // namespace epochfs::cache
