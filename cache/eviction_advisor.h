// EvictionAdvisor: tells a tier when a chunk will next be needed, so it can
// evict by farthest next use (Belady's rule) instead of recency. Implemented
// by prefetch/ from the registered access plans. Must be cheap and
// thread-safe: tiers call it while holding their own locks, so it must never
// call back into a tier.
#pragma once

#include <cstdint>

#include "cache/chunk_key.h"

namespace epochfs::cache {

class EvictionAdvisor {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;  // not needed again in any known plan

  virtual ~EvictionAdvisor() = default;
  // False while no plan is live: the tier then uses its own policy (LRU).
  virtual bool active() const = 0;
  // Nanoseconds until `key` is next read (smaller is sooner), or kNever.
  // In time rather than plan entries: plans of several jobs (one per mount)
  // advance at different speeds, so the nearer entry may be read later.
  virtual uint64_t nextUseNs(const ChunkKey& key) const = 0;
};

}  // namespace epochfs::cache
