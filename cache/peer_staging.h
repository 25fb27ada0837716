// PeerStaging: a bounded area for chunks of files other nodes own, fetched
// from their owners ahead of this node's readers (peer prefetch). It is kept
// apart from the RAM tier on purpose: staged chunks never displace this
// node's own share, and the RAM tier's order-aware eviction never sees them.
//
// The prefetcher admits a chunk only when there is room for it (it reserves
// room before fetching); a chunk leaves when its plan entry is consumed
// (erase), or, if it is never read (the readers left the plan), as the oldest
// when a newer one needs the room (FIFO). A lookup does not remove: a file
// read in several FUSE requests hits every time.
// Thread-safety: every method from any thread (one mutex, never held for I/O).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

#include "cache/chunk_store.h"

namespace epochfs::cache {

class PeerStaging : public ChunkStore {
 public:
  explicit PeerStaging(uint64_t capacityBytes);

  ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) override;
  // Refuses (false) a null chunk or one larger than the capacity; otherwise
  // admits it, dropping the oldest staged chunks if needed.
  bool insert(const ChunkRef& chunk) override;
  bool contains(const ChunkKey& key) const override;
  void erase(const ChunkKey& key) override;
  // evictions: chunks dropped unread to make room.
  TierUsage usage() const override;

  uint64_t capacityBytes() const { return capacity_; }
  uint64_t bytesUsed() const;
  // Chunks admitted, and chunks erased after their read (consumed), since start.
  uint64_t admitted() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t consumed() const { return consumed_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    ChunkRef chunk;
    std::list<uint64_t>::iterator age;
  };
  const uint64_t capacity_;
  mutable std::mutex mu_;  // guards everything below
  std::unordered_map<uint64_t, Entry> entries_;  // by key hash
  std::list<uint64_t> oldestFirst_;
  uint64_t used_ = 0;
  uint64_t evictions_ = 0;
  std::atomic<uint64_t> admitted_{0}, consumed_{0};
};

}  // namespace epochfs::cache
