// PeerStaging: a bounded area for chunks of files other nodes own, fetched
// from their owners ahead of this node's readers (peer prefetch). It is kept
// apart from the RAM tier on purpose: staged chunks never displace this
// node's own share, and the RAM tier's order-aware eviction never sees them.
//
// The prefetcher bounds its lead so that the staged chunks fit; a chunk
// leaves when its plan entry is consumed (erase). When the area is full
// anyway, the new chunk (prefetch goes in order: the one needed last) is
// refused, unless the oldest staged chunk is stale (staged more than
// `staleAfter` ago: its reader left the plan), which then makes room. A
// lookup does not remove: a file read in several FUSE requests hits each time.
// Thread-safety: every method from any thread (one mutex, never held for I/O).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

#include "cache/chunk_store.h"

namespace epochfs::cache {

class PeerStaging : public ChunkStore {
 public:
  explicit PeerStaging(uint64_t capacityBytes,
                       std::chrono::milliseconds staleAfter = std::chrono::seconds(10));

  ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) override;
  // Refuses (false) a null chunk, one larger than the capacity, and one that
  // does not fit without dropping a chunk staged less than staleAfter ago.
  bool insert(const ChunkRef& chunk) override;
  bool contains(const ChunkKey& key) const override;
  void erase(const ChunkKey& key) override;
  // evictions: stale chunks dropped unread to make room.
  TierUsage usage() const override;

  uint64_t capacityBytes() const { return capacity_; }
  // True when `bytes` more would be admitted now: they fit, or the oldest
  // staged chunk is stale (insert drops it).
  bool hasRoom(uint64_t bytes) const;
  uint64_t bytesUsed() const;
  // Chunks admitted, and chunks erased after their read (consumed), since start.
  uint64_t admitted() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t consumed() const { return consumed_.load(std::memory_order_relaxed); }
  // Chunks refused because the area was full of fresh ones.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    ChunkRef chunk;
    std::list<uint64_t>::iterator age;
    Clock::time_point staged;
  };
  const uint64_t capacity_;
  const std::chrono::milliseconds staleAfter_;
  mutable std::mutex mu_;                        // guards everything below
  std::unordered_map<uint64_t, Entry> entries_;  // by key hash
  std::list<uint64_t> oldestFirst_;
  uint64_t used_ = 0;
  uint64_t evictions_ = 0;
  std::atomic<uint64_t> admitted_{0}, consumed_{0}, refused_{0};
};

}  // namespace epochfs::cache
