#include <bit>

#include "cache/cache_stats.h"

namespace epochfs::cache {

void LatencyHistogram::record(uint64_t micros) {
  int b = micros == 0 ? 0 : std::bit_width(micros) - 1;
  if (b >= kBuckets) b = kBuckets - 1;
  counts[b].fetch_add(1, std::memory_order_relaxed);
}

uint64_t LatencyHistogram::quantileMicros(double q) const {
  uint64_t total = 0;
  for (const auto& c : counts) total += c.load(std::memory_order_relaxed);
  if (total == 0) return 0;
  uint64_t want = static_cast<uint64_t>(q * static_cast<double>(total));
  if (want >= total) want = total - 1;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[i].load(std::memory_order_relaxed);
    if (seen > want) return uint64_t{2} << i;
  }
  return uint64_t{2} << (kBuckets - 1);
}

}  // namespace epochfs::cache
