#include "cache/ram_tier.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cache/ram_tier_shard.h"

namespace epochfs::cache {

RamTier::RamTier(uint64_t capacityBytes, uint64_t guestExtraBytes,
                 std::chrono::milliseconds staleAfter)
    : capacity_(capacityBytes),
      guestExtra_(guestExtraBytes),
      limit_(capacityBytes + guestExtraBytes),
      epochs_(capacityBytes) {
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
    MutexLock lock(shards_[i].mu);
    fn(static_cast<const Shard&>(shards_[i]));
  }
}

ChunkRef RamTier::find(const ChunkKey& key, const FileIdentity& id, bool* staged) {
  Shard& s = shardFor(key.hash);
  ChunkRef stale;  // released after the lock
  {
    MutexLock lock(s.mu);
    Shard::Entry* e = s.find(key.hash);
    if (e == nullptr) return nullptr;
    if (e->chunk->identity == id) {
      if (staged != nullptr) *staged = e->cls == kStaged;
      const uint64_t clock = s.tick();
      s.sync(epochs_.generation());
      s.touch(e);
      epochs_.onRead(e->stamp, key.chunkIndex == 0, e->chunk->size(), clock);
      return e->chunk;
    }
    stale = s.remove(key.hash);
  }
  return nullptr;
}

bool RamTier::admit(const ChunkRef& chunk, Class cls) {
  if (!chunk) return false;
  Shard& s = shardFor(chunk->key.hash);
  std::vector<ChunkRef> dropped;  // released after the lock
  const auto advisor = advisor_.use();
  const bool readFirst = epochs_.readFirst();
  MutexLock lock(s.mu);
  const uint64_t clock = s.tick();
  s.sync(epochs_.generation());
  Shard::Entry* e = s.admit(chunk, cls, advisor.get(), readFirst, dropped);
  if (e == nullptr) return false;
  epochs_.onRead(e->stamp, chunk->key.chunkIndex == 0, chunk->size(), clock);
  return true;
}

bool RamTier::insert(const ChunkRef& chunk) {
  if (!chunk) return false;
  bool guest;
  {
    const auto view = ownership_.use();
    guest = isGuest(view.get(), chunk->key);
  }
  return admit(chunk, guest ? kGuest : kOwned);
}

bool RamTier::stage(const ChunkRef& chunk) { return admit(chunk, kStaged); }

uint64_t RamTier::stagingRoom() const {
  const auto now = Shard::Clock::now();
  uint64_t room = 0;
  forEachShard([&](const Shard& s) {
    s.mu.assertHeld();  // forEachShard calls this under the shard's lock
    room += s.stagingRoom(now);
  });
  return room;
}

void RamTier::claimStaged(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  MutexLock lock(s.mu);
  Shard::Entry* e = s.find(key.hash);
  if (e == nullptr || e->cls != kGuest) return;
  e->stagedAt = Shard::Clock::now();
  s.changeClass(e, kStaged);
}

bool RamTier::contains(const ChunkKey& key) const {
  Shard& s = shardFor(key.hash);
  MutexLock lock(s.mu);
  return s.find(key.hash) != nullptr;
}

void RamTier::erase(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  ChunkRef gone;
  MutexLock lock(s.mu);
  gone = s.remove(key.hash);
}

void RamTier::demote(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  MutexLock lock(s.mu);
  if (Shard::Entry* e = s.find(key.hash)) s.demote(e);
}

void RamTier::release(const ChunkKey& key) {
  Shard& s = shardFor(key.hash);
  ChunkRef gone;
  MutexLock lock(s.mu);
  Shard::Entry* e = s.find(key.hash);
  if (e == nullptr) return;
  if (e->cls == kOwned) {
    s.demote(e);
  } else {
    gone = s.remove(key.hash);
  }
}

// Per class (owned, guest, staged), summed over the shards in one pass.
struct RamTier::Totals {
  ClassUsage cls[3];
  uint64_t admittedStaged = 0, refusedStaged = 0;
};

RamTier::Totals RamTier::totals() const {
  Totals t;
  forEachShard([&](const Shard& s) {
    s.mu.assertHeld();  // forEachShard calls this under the shard's lock
    for (auto c : {kOwned, kGuest, kStaged}) {
      t.cls[c].bytes += s.list(c).bytes;
      t.cls[c].chunks += s.list(c).chunks;
      t.cls[c].evictions += s.evictions(c);
    }
    t.admittedStaged += s.admittedStaged();
    t.refusedStaged += s.refused();
  });
  return t;
}

TierUsage RamTier::usage() const {
  const ClassUsage owned = this->owned(), guests = this->guests();
  TierUsage u;
  u.capacityBytes = limit_.load(std::memory_order_relaxed);
  u.bytesUsed = owned.bytes + guests.bytes;
  u.chunks = owned.chunks + guests.chunks;
  u.evictions = owned.evictions + guests.evictions;
  return u;
}

RamTier::ClassUsage RamTier::owned() const { return totals().cls[kOwned]; }

RamTier::ClassUsage RamTier::guests() const {
  const Totals t = totals();
  ClassUsage u = t.cls[kGuest];
  u.bytes += t.cls[kStaged].bytes;
  u.chunks += t.cls[kStaged].chunks;
  u.evictions += t.cls[kStaged].evictions;
  return u;
}

RamTier::StagedUsage RamTier::staged() const {
  const Totals t = totals();
  StagedUsage u;
  u.bytes = t.cls[kStaged].bytes;
  u.chunks = t.cls[kStaged].chunks;
  u.droppedUnread = t.cls[kStaged].evictions;
  u.admitted = t.admittedStaged;
  u.refused = t.refusedStaged;
  return u;
}

uint64_t RamTier::reclassify() {
  uint64_t changed = 0;
  const auto view = ownership_.use();
  const bool readFirst = epochs_.readFirst();
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::vector<ChunkRef> dropped;  // released after the lock
    MutexLock lock(s.mu);
    s.forEach([&](Shard::Entry* e) {
      s.mu.assertHeld();  // forEach runs under `lock`
      const bool guest = isGuest(view.get(), e->chunk->key);
      if (guest == (e->cls != kOwned)) return;
      // A file that became owned here stays, as owned; one that moved away
      // becomes a (plain) guest.
      s.changeClass(e, guest ? kGuest : kOwned);
      ++changed;
    });
    s.enforceBudgets(readFirst, dropped);
  }
  return changed;
}

void RamTier::setCapacity(uint64_t bytes) {
  bytes = std::min(bytes, capacity_ + guestExtra_);
  limit_.store(bytes, std::memory_order_relaxed);
  const uint64_t owned = std::min(bytes, capacity_), extra = bytes - owned;
  epochs_.setCapacity(owned);
  const bool readFirst = epochs_.readFirst();
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::vector<ChunkRef> dropped;  // released after the lock
    MutexLock lock(s.mu);
    s.capacity = owned / shardCount_ + (i < owned % shardCount_ ? 1 : 0);
    s.guestExtra = extra / shardCount_ + (i < extra % shardCount_ ? 1 : 0);
    s.enforceBudgets(readFirst, dropped);
  }
}

void RamTier::clear() {
  for (size_t i = 0; i < shardCount_; ++i) {
    Shard& s = shards_[i];
    std::vector<ChunkRef> gone;  // freed after the lock
    MutexLock lock(s.mu);
    s.clear(gone);
  }
}

}  // namespace epochfs::cache
