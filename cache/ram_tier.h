// RamTier: the in-memory chunk tier. Owns references to the chunks it holds
// (ChunkRef), bounded by a byte capacity (the chunks' data bytes), and evicts
// least-recently-used chunks when full. With a live EvictionAdvisor (an
// access plan is registered) it evicts by farthest next use instead: among the
// kVictimScan entries at the cold end of the list (where demote() puts
// consumed chunks) the one needed last goes, and a chunk needed later than
// that victim is not admitted at all (Belady's rule with admission control).
//
// Sharded by key hash: each shard has its own mutex, hash map and LRU list and
// an equal slice of the capacity (as LevelDB's ShardedLRUCache), so FUSE
// workers rarely contend. Small caches use fewer shards, so that every shard
// holds at least kMinShardBytes and a 1 MiB chunk always fits when the
// capacity is at least 1 MiB (a single shard below 2 * kMinShardBytes).
//
// Thread-safety: every method may be called from any thread concurrently. A
// lookup hit takes one shard lock, moves the entry to the front of the LRU
// list in place and copies a shared_ptr: it does not allocate. Chunks are
// immutable and were checksummed when built; a hit does not re-hash them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cache/chunk_store.h"
#include "cache/eviction_advisor.h"

namespace epochfs::cache {

class RamTier : public ChunkStore {
 public:
  static constexpr size_t kMaxShards = 16;
  static constexpr uint64_t kMinShardBytes = 32ull << 20;

  explicit RamTier(uint64_t capacityBytes);
  ~RamTier() override;
  RamTier(const RamTier&) = delete;
  RamTier& operator=(const RamTier&) = delete;

  ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) override;
  // Replaces an entry with the same key. Refuses (false) a null chunk or one
  // larger than maxChunkBytes().
  bool insert(const ChunkRef& chunk) override;
  bool contains(const ChunkKey& key) const override;
  void erase(const ChunkKey& key) override;
  void demote(const ChunkKey& key) override;
  // bytesUsed counts chunk data bytes; corruptions is always 0 (RAM chunks are
  // not re-verified). Evictions count chunks dropped to make room only.
  TierUsage usage() const override;

  // Drops every chunk (not counted as evictions).
  void clear();

  // Installs the advisor consulted on eviction (null: plain LRU). Not owned;
  // must outlive this tier or be reset first.
  void setAdvisor(const EvictionAdvisor* advisor) { advisor_.store(advisor); }
  static constexpr int kVictimScan = 64;

  size_t shardCount() const { return shardCount_; }
  // The shard a key hash lands in among `shardCount` (a power of two up to
  // kMaxShards). With fewer shards the index is the low bits of the index
  // among kMaxShards: `chunk_shards` (epochctl mrc) relies on that.
  static size_t shardIndex(uint64_t keyHash, size_t shardCount) {
    // The map buckets use the low bits; pick shards with higher ones.
    return (keyHash >> 40) & (shardCount - 1);
  }
  // The largest chunk insert() accepts: the capacity of one shard.
  uint64_t maxChunkBytes() const;

 private:
  struct Shard;
  Shard& shardFor(uint64_t hash) const;

  std::atomic<const EvictionAdvisor*> advisor_{nullptr};
  const uint64_t capacity_;
  size_t shardCount_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace epochfs::cache
