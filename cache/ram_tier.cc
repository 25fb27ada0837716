#include "cache/ram_tier.h"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace epochfs::cache {

namespace {

// An LRU list node living inside the map's node (whose address is stable), so
// moving an entry to the front relinks pointers and never allocates.
struct Entry {
  ChunkRef chunk;
  Entry* prev = nullptr;
  Entry* next = nullptr;
};

}  // namespace

struct alignas(64) RamTier::Shard {
  // Lock order: a thread holds at most one shard's mu at a time.
  mutable std::mutex mu;
  std::unordered_map<uint64_t, Entry> map;  // key.hash -> entry
  Entry head;                               // sentinel: head.next is MRU, head.prev is LRU
  uint64_t bytes = 0;
  uint64_t capacity = 0;
  uint64_t evictions = 0;

  Shard() { head.prev = head.next = &head; }

  void unlink(Entry* e) {
    e->prev->next = e->next;
    e->next->prev = e->prev;
  }
  void pushFront(Entry* e) {
    e->prev = &head;
    e->next = head.next;
    head.next->prev = e;
    head.next = e;
  }
  // Removes `it` from list and map; hands its chunk to the caller so the last
  // reference (and the data's free) can be dropped outside the lock.
  ChunkRef remove(std::unordered_map<uint64_t, Entry>::iterator it) {
    unlink(&it->second);
    ChunkRef c = std::move(it->second.chunk);
    bytes -= c->size();
    map.erase(it);
    return c;
  }
};

RamTier::RamTier(uint64_t capacityBytes) : capacity_(capacityBytes) {
  shardCount_ = 1;
  while (shardCount_ < kMaxShards && capacity_ / (shardCount_ * 2) >= kMinShardBytes) {
    shardCount_ *= 2;
  }
  shards_ = std::make_unique<Shard[]>(shardCount_);
  const uint64_t base = capacity_ / shardCount_;
  const uint64_t rest = capacity_ % shardCount_;
  for (size_t i = 0; i < shardCount_; ++i) shards_[i].capacity = base + (i < rest ? 1 : 0);
}

RamTier::~RamTier() = default;

RamTier::Shard& RamTier::shardFor(uint64_t hash) const {
  return shards_[shardIndex(hash, shardCount_)];
}

uint64_t RamTier::maxChunkBytes() const { return capacity_ / shardCount_; }

ChunkRef RamTier::lookup(const ChunkKey& key, const FileIdentity& id) {
  Shard& s = shardFor(key.hash);
  ChunkRef stale;  // released after the lock
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key.hash);
    if (it == s.map.end()) return nullptr;
    Entry* e = &it->second;
    if (e->chunk->identity == id) {
      s.unlink(e);
      s.pushFront(e);
      return e->chunk;
    }
    stale = s.remove(it);
  }
  return nullptr;
}

bool RamTier::insert(const ChunkRef& chunk) {
  if (!chunk) return false;
  Shard& s = shardFor(chunk->key.hash);
  const uint64_t n = chunk->size();
  if (n > s.capacity) return false;
  std::vector<ChunkRef> dropped;  // released after the lock
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, inserted] = s.map.try_emplace(chunk->key.hash);
    Entry* e = &it->second;
    if (!inserted) {
      s.unlink(e);
      s.bytes -= e->chunk->size();
      dropped.push_back(std::move(e->chunk));
    }
    // Evict from the cold end (never the new entry, which is not linked yet).
    const EvictionAdvisor* advisor = advisor_.load();
    const bool byNextUse = advisor != nullptr && advisor->active();
    const uint64_t incomingUse = byNextUse ? advisor->nextUse(chunk->key) : 0;
    while (s.bytes + n > s.capacity && s.head.prev != &s.head) {
      Entry* victim = s.head.prev;
      if (byNextUse) {
        // Farthest next use among the coldest entries.
        uint64_t farthest = advisor->nextUse(victim->chunk->key);
        Entry* e = victim->prev;
        for (int i = 1; i < kVictimScan && e != &s.head && farthest != EvictionAdvisor::kNever;
             ++i, e = e->prev) {
          const uint64_t use = advisor->nextUse(e->chunk->key);
          if (use > farthest) farthest = use, victim = e;
        }
        if (incomingUse > farthest) {
          // Everything we could evict is needed sooner than the newcomer: do
          // not admit it (an old copy of the key was already dropped above).
          s.map.erase(it);
          return false;
        }
      }
      auto vit = s.map.find(victim->chunk->key.hash);
      dropped.push_back(s.remove(vit));
      ++s.evictions;
    }
    e->chunk = chunk;
    s.bytes += n;
    s.pushFront(e);
  }
  return true;
}

bool RamTier::contains(const ChunkKey& key) const {
  Shard& s = shardFor(key.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.map.count(key.hash) != 0;
}

void RamTier::erase(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  ChunkRef gone;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key.hash);
  if (it != s.map.end()) gone = s.remove(it);
}

void RamTier::demote(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key.hash);
  if (it == s.map.end()) return;
  Entry* e = &it->second;
  s.unlink(e);
  // Push to the cold end.
  e->next = &s.head;
  e->prev = s.head.prev;
  s.head.prev->next = e;
  s.head.prev = e;
}

TierUsage RamTier::usage() const {
  TierUsage u;
  u.capacityBytes = capacity_;
  for (size_t i = 0; i < shardCount_; ++i) {
    const Shard& s = shards_[i];
    std::lock_guard<std::mutex> lock(s.mu);
    u.bytesUsed += s.bytes;
    u.chunks += s.map.size();
    u.evictions += s.evictions;
  }
  return u;
}

void RamTier::clear() {
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::unordered_map<uint64_t, Entry> gone;  // freed after the lock
    std::lock_guard<std::mutex> lock(s.mu);
    gone.swap(s.map);
    s.head.prev = s.head.next = &s.head;
    s.bytes = 0;
  }
}

}  // namespace epochfs::cache
