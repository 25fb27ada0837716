// ChunkStore: one cache tier (RAM, local disk). Thread-safe. A tier bounds
// its own bytes and evicts by its own policy when full.
#pragma once

#include <cstdint>

#include "cache/chunk.h"

namespace epochfs::cache {

struct TierUsage {
  uint64_t bytesUsed = 0;
  uint64_t capacityBytes = 0;
  uint64_t chunks = 0;
  uint64_t evictions = 0;    // chunks evicted to make room, since start
  uint64_t corruptions = 0;  // chunks found damaged and dropped, since start
};

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;

  // The chunk for `key` if this tier holds it for exactly version `id` and
  // its bytes verify; nullptr otherwise. A chunk that fails verification or
  // belongs to another version is dropped, and never returned.
  virtual ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) = 0;

  // Admits `chunk` (evicting others if needed). Returns false if not admitted
  // (larger than the tier, tier unhealthy, I/O error). Never blocks on peers.
  virtual bool insert(const ChunkRef& chunk) = 0;

  // True if the tier holds `key` (any version); cheap, no I/O.
  virtual bool contains(const ChunkKey& key) const = 0;

  // Drops `key` if present.
  virtual void erase(const ChunkKey& key) = 0;

  // Drops `key` because a caller found the returned chunk damaged (e.g. not
  // the length its file version implies); counted in usage().corruptions
  // where the tier counts them. Default: erase().
  virtual void eraseCorrupt(const ChunkKey& key) { erase(key); }

  // A hint that `key` was just consumed and is not needed again soon: make
  // it the first candidate for eviction. Default: ignored.
  virtual void demote(const ChunkKey& key) {}

  virtual TierUsage usage() const = 0;
};

}  // namespace epochfs::cache
