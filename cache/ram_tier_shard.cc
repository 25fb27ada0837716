#include "cache/ram_tier_shard.h"

#include <utility>

namespace epochfs::cache {

RamTier::Shard::Entry* RamTier::Shard::find(uint64_t hash) {
  auto it = map_.find(hash);
  return it == map_.end() ? nullptr : &it->second;
}

void RamTier::Shard::link(Entry* e, Class cls, bool hot) {
  List& l = lists_[cls];
  e->cls = cls;
  Entry* after = hot ? &l.head : l.head.prev;  // insert between `after` and its next
  e->prev = after;
  e->next = after->next;
  after->next->prev = e;
  after->next = e;
  // The first owned entry linked hot in this generation starts the prefix.
  if (cls == kOwned && hot && oldestRead_ == nullptr) oldestRead_ = e;
  if (hot) e->touched = clock_;
  l.bytes += e->chunk->size();
  ++l.chunks;
}

void RamTier::Shard::unlink(Entry* e) {
  List& l = lists_[e->cls];
  if (e == oldestRead_) oldestRead_ = e->prev == &l.head ? nullptr : e->prev;
  e->prev->next = e->next;
  e->next->prev = e->prev;
  l.bytes -= e->chunk->size();
  --l.chunks;
}

ChunkRef RamTier::Shard::drop(Entry* e) {
  unlink(e);
  const uint64_t hash = e->chunk->key.hash;
  ChunkRef c = std::move(e->chunk);
  map_.erase(hash);
  return c;
}

ChunkRef RamTier::Shard::remove(uint64_t hash) {
  Entry* e = find(hash);
  return e == nullptr ? nullptr : drop(e);
}

void RamTier::Shard::touch(Entry* e) {
  // Staged guests keep their staging order: the oldest is the one to go
  // when it turns stale.
  if (e->cls == kStaged) return;
  const Class cls = e->cls;
  unlink(e);
  link(e, cls);
}

void RamTier::Shard::changeClass(Entry* e, Class cls) {
  unlink(e);
  link(e, cls);
}

void RamTier::Shard::demote(Entry* e) {
  const Class cls = e->cls == kStaged ? kGuest : e->cls;
  unlink(e);
  link(e, cls, /*hot=*/false);
}

bool RamTier::Shard::evictGuests(uint64_t need, uint64_t budget, bool anyStaged,
                                 Clock::time_point now, std::vector<ChunkRef>& dropped) {
  while (guestBytes() + need > budget) {
    Entry* victim = nullptr;
    if (!lists_[kGuest].empty()) {
      victim = lists_[kGuest].coldest();
    } else if (!lists_[kStaged].empty() && (anyStaged || stale(lists_[kStaged].coldest(), now))) {
      victim = lists_[kStaged].coldest();
    } else {
      return false;
    }
    ++evictions_[victim->cls];
    dropped.push_back(drop(victim));
  }
  return true;
}

bool RamTier::Shard::evictStaleStaged(uint64_t need, Clock::time_point now,
                                      std::vector<ChunkRef>& dropped) {
  List& st = lists_[kStaged];
  while (st.bytes + need > guestExtra) {
    if (st.empty() || !stale(st.coldest(), now)) return false;
    ++evictions_[kStaged];
    dropped.push_back(drop(st.coldest()));
  }
  return true;
}

bool RamTier::Shard::evictOwned(uint64_t need, const ChunkKey& incoming,
                                const EvictionAdvisor* advisor, bool readFirst,
                                std::vector<ChunkRef>& dropped) {
  List& owned = lists_[kOwned];
  const bool byNextUse = advisor != nullptr && advisor->active();
  const uint64_t incomingUse = byNextUse ? advisor->nextUseNs(incoming) : 0;
  while (owned.bytes + need > capacity && !owned.empty()) {
    Entry* victim = owned.coldest();
    if (byNextUse) {
      // Farthest next use among the coldest entries.
      uint64_t farthest = advisor->nextUseNs(victim->chunk->key);
      Entry* e = victim->prev;
      for (int i = 1; i < kVictimScan && e != &owned.head && farthest != EvictionAdvisor::kNever;
           ++i, e = e->prev) {
        const uint64_t use = advisor->nextUseNs(e->chunk->key);
        if (use > farthest) farthest = use, victim = e;
      }
      // Everything we could evict is needed sooner than the newcomer: do not
      // admit it.
      if (incomingUse > farthest) return false;
    } else {
      victim = ownedVictim(readFirst);
    }
    evictOwnedEntry(victim, dropped);
  }
  return owned.bytes + need <= capacity;
}

RamTier::Shard::Entry* RamTier::Shard::ownedVictim(bool readFirst) {
  // Epoch mode (EpochDetector): read already this epoch, so not needed again
  // before the next one, unlike every chunk colder than it.
  if (readFirst && oldestRead_ != nullptr && clock_ - oldestRead_->touched >= kInFlightReads) {
    return oldestRead_;
  }
  return lists_[kOwned].coldest();
}

void RamTier::Shard::evictOwnedEntry(Entry* victim, std::vector<ChunkRef>& dropped) {
  ghosts_[victim->chunk->key.hash % kGhosts] = Ghost{victim->chunk->key.hash, victim->stamp};
  ++evictions_[kOwned];
  dropped.push_back(drop(victim));
}

RamTier::Shard::Entry* RamTier::Shard::admit(const ChunkRef& chunk, Class cls,
                                             const EvictionAdvisor* advisor, bool readFirst,
                                             std::vector<ChunkRef>& dropped) {
  const uint64_t n = chunk->size();
  const uint64_t hash = chunk->key.hash;
  // An old copy of the key goes first, whatever happens to the new one.
  if (Entry* old = find(hash)) dropped.push_back(drop(old));
  const Clock::time_point now = Clock::now();
  if (cls == kOwned) {
    if (n > capacity) return nullptr;
    if (!evictOwned(n, chunk->key, advisor, readFirst, dropped)) return nullptr;
    // Guests keep only the room the owned chunks leave: any of them goes,
    // staged or not, before an owned chunk is refused.
    const uint64_t owned = lists_[kOwned].bytes + n;
    const uint64_t budget = (owned < capacity ? capacity - owned : 0) + guestExtra;
    evictGuests(0, budget, /*anyStaged=*/true, now, dropped);
  } else {
    const uint64_t budget = guestBudget();
    bool fits = n <= budget && evictGuests(n, budget, /*anyStaged=*/false, now, dropped);
    // Staged guests together stay within the extra (the prefetch memory).
    if (fits && cls == kStaged) fits = evictStaleStaged(n, now, dropped);
    if (!fits) {
      if (cls == kStaged) ++refused_;
      return nullptr;
    }
  }
  Entry* e = &map_.try_emplace(hash).first->second;
  e->chunk = chunk;
  e->stagedAt = now;
  const Ghost& ghost = ghosts_[hash % kGhosts];
  if (ghost.hash == hash && ghost.stamp.gen == gen_) e->stamp = ghost.stamp;
  link(e, cls);
  if (cls == kStaged) ++admittedStaged_;
  return e;
}

void RamTier::Shard::enforceBudgets(bool readFirst, std::vector<ChunkRef>& dropped) {
  List& owned = lists_[kOwned];
  while (owned.bytes > capacity && !owned.empty()) evictOwnedEntry(ownedVictim(readFirst), dropped);
  evictGuests(0, guestBudget(), /*anyStaged=*/true, Clock::now(), dropped);
}

uint64_t RamTier::Shard::stagingRoom(Clock::time_point now) const {
  const List& st = lists_[kStaged];
  uint64_t fresh = st.bytes;
  // The oldest staged guest, once stale, gives way to a new one.
  if (!st.empty() && stale(st.head.prev, now)) fresh -= st.head.prev->chunk->size();
  // Staged guests are bounded by the extra (the prefetch memory), which the
  // guests' budget always includes: the free room of the own share is for
  // guests the readers already use.
  return guestExtra > fresh ? guestExtra - fresh : 0;
}

void RamTier::Shard::clear(std::vector<ChunkRef>& gone) {
  for (Class c : {kOwned, kGuest}) {
    while (!lists_[c].empty()) gone.push_back(drop(lists_[c].coldest()));
  }
}

}  // namespace epochfs::cache
