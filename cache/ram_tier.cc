#include "cache/ram_tier.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/ram_tier_shard.h"

namespace epochfs::cache {

RamTier::RamTier(uint64_t capacityBytes, uint64_t guestExtraBytes,
                 std::chrono::milliseconds staleAfter)
    : capacity_(capacityBytes), guestExtra_(guestExtraBytes) {
  shardCount_ = 1;
  while (shardCount_ < kMaxShards && capacity_ / (shardCount_ * 2) >= kMinShardBytes) {
    shardCount_ *= 2;
  }
  shards_ = std::make_unique<Shard[]>(shardCount_);
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    s.capacity = capacity_ / shardCount_ + (i < capacity_ % shardCount_ ? 1 : 0);
    s.guestExtra = guestExtra_ / shardCount_ + (i < guestExtra_ % shardCount_ ? 1 : 0);
    s.staleAfter = staleAfter;
  }
}

RamTier::~RamTier() = default;

RamTier::Shard& RamTier::shardFor(uint64_t hash) const {
  return shards_[shardIndex(hash, shardCount_)];
}

uint64_t RamTier::maxChunkBytes() const { return capacity_ / shardCount_; }

template <typename Fn>
void RamTier::forEachShard(Fn&& fn) const {
  for (size_t i = 0; i < shardCount_; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    fn(static_cast<const Shard&>(shards_[i]));
  }
}

bool RamTier::isGuest(const ChunkKey& key) const {
  const OwnershipView* view = ownership_.load();
  return view != nullptr && !view->ownedHere(key.fileId);
}

ChunkRef RamTier::find(const ChunkKey& key, const FileIdentity& id, bool* staged) {
  Shard& s = shardFor(key.hash);
  ChunkRef stale;  // released after the lock
  {
    std::lock_guard<std::mutex> lock(s.mu);
    Shard::Entry* e = s.find(key.hash);
    if (e == nullptr) return nullptr;
    if (e->chunk->identity == id) {
      if (staged != nullptr) *staged = e->cls == Shard::kStaged;
      s.touch(e);
      return e->chunk;
    }
    stale = s.remove(key.hash);
  }
  return nullptr;
}

bool RamTier::admit(const ChunkRef& chunk, bool guest, bool staged) {
  if (!chunk) return false;
  const Shard::Class cls = staged ? Shard::kStaged : guest ? Shard::kGuest : Shard::kOwned;
  Shard& s = shardFor(chunk->key.hash);
  std::vector<ChunkRef> dropped;  // released after the lock
  std::lock_guard<std::mutex> lock(s.mu);
  return s.admit(chunk, cls, advisor_.load(), dropped);
}

bool RamTier::insert(const ChunkRef& chunk) {
  return chunk && admit(chunk, isGuest(chunk->key), false);
}

bool RamTier::stage(const ChunkRef& chunk) { return admit(chunk, true, true); }

uint64_t RamTier::stagingRoom() const {
  const auto now = Shard::Clock::now();
  uint64_t room = 0;
  forEachShard([&](const Shard& s) { room += s.stagingRoom(now); });
  return room;
}

void RamTier::claimStaged(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  Shard::Entry* e = s.find(key.hash);
  if (e == nullptr || e->cls != Shard::kGuest) return;
  e->stagedAt = Shard::Clock::now();
  s.changeClass(e, Shard::kStaged);
}

bool RamTier::contains(const ChunkKey& key) const {
  Shard& s = shardFor(key.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.find(key.hash) != nullptr;
}

void RamTier::erase(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  ChunkRef gone;
  std::lock_guard<std::mutex> lock(s.mu);
  gone = s.remove(key.hash);
}

void RamTier::demote(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  if (Shard::Entry* e = s.find(key.hash)) s.demote(e);
}

void RamTier::release(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  ChunkRef gone;
  std::lock_guard<std::mutex> lock(s.mu);
  Shard::Entry* e = s.find(key.hash);
  if (e == nullptr) return;
  if (e->cls == Shard::kOwned) {
    s.demote(e);
  } else {
    gone = s.remove(key.hash);
  }
}

TierUsage RamTier::usage() const {
  TierUsage u;
  u.capacityBytes = capacity_ + guestExtra_;
  forEachShard([&](const Shard& s) {
    for (auto c : {Shard::kOwned, Shard::kGuest, Shard::kStaged}) {
      u.bytesUsed += s.list(c).bytes;
      u.chunks += s.list(c).chunks;
      u.evictions += s.evictions(c);
    }
  });
  return u;
}

RamTier::ClassUsage RamTier::owned() const {
  ClassUsage u;
  forEachShard([&](const Shard& s) {
    u.bytes += s.list(Shard::kOwned).bytes;
    u.chunks += s.list(Shard::kOwned).chunks;
    u.evictions += s.evictions(Shard::kOwned);
  });
  return u;
}

RamTier::ClassUsage RamTier::guests() const {
  ClassUsage u;
  forEachShard([&](const Shard& s) {
    for (auto c : {Shard::kGuest, Shard::kStaged}) {
      u.bytes += s.list(c).bytes;
      u.chunks += s.list(c).chunks;
      u.evictions += s.evictions(c);
    }
  });
  return u;
}

RamTier::StagedUsage RamTier::staged() const {
  StagedUsage u;
  forEachShard([&](const Shard& s) {
    u.bytes += s.list(Shard::kStaged).bytes;
    u.chunks += s.list(Shard::kStaged).chunks;
    u.admitted += s.admittedStaged();
    u.refused += s.refused();
    u.droppedUnread += s.evictions(Shard::kStaged);
  });
  return u;
}

uint64_t RamTier::reclassify() {
  uint64_t changed = 0;
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::vector<ChunkRef> dropped;  // released after the lock
    std::lock_guard<std::mutex> lock(s.mu);
    s.forEach([&](Shard::Entry* e) {
      const bool guest = isGuest(e->chunk->key);
      if (guest == (e->cls != Shard::kOwned)) return;
      // A file that became owned here stays, as owned; one that moved away
      // becomes a (plain) guest.
      s.changeClass(e, guest ? Shard::kGuest : Shard::kOwned);
      ++changed;
    });
    s.enforceBudgets(dropped);
  }
  return changed;
}

void RamTier::clear() {
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::vector<ChunkRef> gone;  // freed after the lock
    std::lock_guard<std::mutex> lock(s.mu);
    s.clear(gone);
  }
}

}  // namespace epochfs::cache
