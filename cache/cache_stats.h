// CacheStats: the read path's counters (lock-free, relaxed). Read by the
// admin socket (`epochctl stats`) and by tests. The kernel page cache is a
// tier too, but it is invisible here: hits there never reach the daemon.
#pragma once

#include <atomic>
#include <cstdint>

namespace epochfs::cache {

struct TierCounters {
  std::atomic<uint64_t> chunks{0};
  std::atomic<uint64_t> bytes{0};
  void add(uint64_t n) {
    chunks.fetch_add(1, std::memory_order_relaxed);
    bytes.fetch_add(n, std::memory_order_relaxed);
  }
};

// Log2 latency histogram in microseconds: bucket i holds [2^i, 2^(i+1)) us.
struct LatencyHistogram {
  static constexpr int kBuckets = 32;
  std::atomic<uint64_t> counts[kBuckets] = {};
  void record(uint64_t micros);
  // The upper bound (us) of the bucket holding quantile q in [0,1]; 0 if empty.
  uint64_t quantileMicros(double q) const;
};

struct CacheStats {
  // Reader-visible: chunk pieces and bytes handed to FUSE reads, by the tier
  // that had them.
  TierCounters ram;
  TierCounters staging;  // peer prefetch's staging area (other nodes' files)
  TierCounters disk;
  TierCounters peer;
  TierCounters source;
  // Source I/O: whole chunks read from the source (misses, prefetches).
  TierCounters sourceReads;
  // Whole chunks fetched from owner peers, and peer fetches that failed (the
  // read then went to the source).
  TierCounters peerReads;
  // Whole chunks the prefetcher fetched from peers into the staging area.
  TierCounters stagedReads;
  std::atomic<uint64_t> peerErrors{0};
  std::atomic<uint64_t> coalesced{0};     // misses that waited on another's fetch
  std::atomic<uint64_t> sourceErrors{0};  // source reads that failed
  std::atomic<uint64_t> readRequests{0};  // FUSE READ requests served
  std::atomic<uint64_t> readBytes{0};     // bytes returned to FUSE READs
  LatencyHistogram sourceLatency;
};

}  // namespace epochfs::cache
