// PrefetchOptions: the prefetcher's settings and their defaults, in a header
// of their own (no threads, no queues) so the daemon's option parser takes
// its defaults from here: one default per option (--prefetch-window,
// --prefetch-threads; docs/CONFIGURATION.md).
#pragma once

#include <cstdint>

namespace epochfs::prefetch {

// Where stream positions come from (position_source.h).
enum class PositionMode { kReads, kOpens, kSentinels };

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
  uint64_t deviationReads = 2000;  // accesses (reads, or opens with kOpens) off every plan
  // Where positions come from (position_source.h): reads; opens (page-cache
  // push: opens reach the daemon); sentinels (every `sentinelEvery`th entry
  // is not pushed, its read carries the position; opens stay zero-message).
  PositionMode position = PositionMode::kReads;
  uint32_t sentinelEvery = 8;
};

}  // namespace epochfs::prefetch
