// RamTier::Shard: one lock's worth of the RAM tier (ram_tier.h): a hash map of
// entries and three intrusive lists, owned, guests and staged guests. Private
// to ram_tier.cc and its unit tests; every method REQUIRES(mu) (Lock order: a
// thread holds at most one shard's mu at a time).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cache/epoch_detector.h"
#include "cache/eviction_advisor.h"
#include "cache/mutex.h"
#include "cache/ram_tier.h"

namespace epochfs::cache {

class alignas(64) RamTier::Shard {
 public:
  using Clock = std::chrono::steady_clock;

  // An entry lives inside the map's node (whose address is stable), so moving
  // it within or between lists relinks pointers and never allocates.
  struct Entry {
    ChunkRef chunk;
    Entry* prev = nullptr;
    Entry* next = nullptr;
    Class cls = kOwned;
    Clock::time_point stagedAt;
    EpochDetector::Stamp stamp;  // its reads, for the EpochDetector
    uint64_t touched = 0;        // the read clock when last linked hot or hit
  };
  // A list's sentinel: head.next is the hottest (newest), head.prev the coldest.
  struct List {
    Entry head;
    uint64_t bytes = 0;
    uint64_t chunks = 0;
    List() { head.prev = head.next = &head; }
    bool empty() const { return head.next == &head; }
    Entry* coldest() { return head.prev; }
  };

  mutable Mutex mu;
  uint64_t capacity GUARDED_BY(mu) = 0;         // owned budget
  uint64_t guestExtra GUARDED_BY(mu) = 0;       // guests' budget beyond the owned chunks' free room
  std::chrono::milliseconds staleAfter{10000};  // set before the tier is shared
  // In epoch mode a chunk read within this many reads of its shard is not
  // taken as the victim: its reader may still want its next pieces (8
  // readers' 128 KiB pieces of 512 KiB files, all in one shard: 32 reads).
  static constexpr uint64_t kInFlightReads = 32;

  Shard() = default;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // The entry for `hash`, or null.
  Entry* find(uint64_t hash) REQUIRES(mu);
  // Follows the tier's generation (EpochDetector): when it moved on, no owned
  // entry counts as read in it any more. Call before touch() and admit().
  void sync(uint32_t generation) REQUIRES(mu) {
    if (generation == gen_) return;
    gen_ = generation;
    oldestRead_ = nullptr;
  }
  // Counts a read (hit or admission) on the shard's read clock.
  uint64_t tick() REQUIRES(mu) { return ++clock_; }
  // Moves a hit to the front of its own list.
  void touch(Entry* e) REQUIRES(mu);
  // Admits `chunk` in class `cls`; the chunks it displaced go to `dropped`
  // (to be released after the lock). Null: refused (see RamTier::insert).
  // Without an active advisor, `readFirst` (epoch mode) evicts the owned
  // chunks read in the current generation first, oldest read first.
  Entry* admit(const ChunkRef& chunk, Class cls, const EvictionAdvisor* advisor, bool readFirst,
               std::vector<ChunkRef>& dropped) REQUIRES(mu);
  // Removes the entry for `hash` if present.
  ChunkRef remove(uint64_t hash) REQUIRES(mu);
  // To the cold end of its class; a staged guest becomes a plain guest.
  void demote(Entry* e) REQUIRES(mu);
  // Moves `e` to class `cls` (at the front of its list).
  void changeClass(Entry* e, Class cls) REQUIRES(mu);
  // Evicts until the budgets hold again (after class changes or a lower
  // capacity); owned chunks as admit() does without an advisor.
  void enforceBudgets(bool readFirst, std::vector<ChunkRef>& dropped) REQUIRES(mu);
  // Bytes a staged guest could take now.
  uint64_t stagingRoom(Clock::time_point now) const REQUIRES(mu);
  // Drops every entry but the staged guests (into `gone`).
  void clear(std::vector<ChunkRef>& gone) REQUIRES(mu);

  const List& list(Class c) const REQUIRES(mu) { return lists_[c]; }
  uint64_t evictions(Class c) const REQUIRES(mu) { return evictions_[c]; }
  uint64_t refused() const REQUIRES(mu) { return refused_; }
  uint64_t admittedStaged() const REQUIRES(mu) { return admittedStaged_; }
  template <typename Fn>
  void forEach(Fn&& fn) REQUIRES(mu) {
    for (auto& [hash, e] : map_) fn(&e);
  }

 private:
  uint64_t guestBytes() const REQUIRES(mu) { return lists_[kGuest].bytes + lists_[kStaged].bytes; }
  // The guests' budget: what the owned chunks leave free, plus the extra.
  uint64_t guestBudget() const REQUIRES(mu) {
    const uint64_t owned = lists_[kOwned].bytes;
    return (owned < capacity ? capacity - owned : 0) + guestExtra;
  }
  bool stale(const Entry* e, Clock::time_point now) const REQUIRES(mu) {
    return now - e->stagedAt >= staleAfter;
  }
  // At the hot (or cold) end of list `cls`.
  void link(Entry* e, Class cls, bool hot = true) REQUIRES(mu);
  void unlink(Entry* e) REQUIRES(mu);
  ChunkRef drop(Entry* e) REQUIRES(mu);  // unlinks, erases from the map, returns the chunk
  // Evicts guests until `need` more guest bytes fit in `budget`: plain guests
  // from the cold end, then staged ones oldest first (all of them if
  // `anyStaged`, else only stale ones). False if it cannot make the room.
  bool evictGuests(uint64_t need, uint64_t budget, bool anyStaged, Clock::time_point now,
                   std::vector<ChunkRef>& dropped) REQUIRES(mu);
  // Evicts stale staged guests until `need` more staged bytes fit within
  // guestExtra; false if the fresh ones fill it.
  bool evictStaleStaged(uint64_t need, Clock::time_point now, std::vector<ChunkRef>& dropped)
      REQUIRES(mu);
  // Evicts owned chunks until `need` more owned bytes fit; false when the
  // advisor says the newcomer is needed after every candidate victim.
  bool evictOwned(uint64_t need, const ChunkKey& incoming, const EvictionAdvisor* advisor,
                  bool readFirst, std::vector<ChunkRef>& dropped) REQUIRES(mu);
  // The owned chunk to go without an advisor: in epoch mode the one read
  // longest ago in this generation (unless its read may still be going on),
  // else the coldest.
  Entry* ownedVictim(bool readFirst) REQUIRES(mu);
  // Drops an owned chunk for room, remembering its ghost.
  void evictOwnedEntry(Entry* victim, std::vector<ChunkRef>& dropped) REQUIRES(mu);

  // Ghosts: the stamps of the owned chunks evicted last, direct-mapped by key
  // hash. A chunk admitted again takes its ghost's stamp when it is of the
  // current generation: its miss is then a re-read (or a piece of the same
  // read) for the EpochDetector, not a first read.
  struct Ghost {
    uint64_t hash = 0;
    EpochDetector::Stamp stamp;
  };
  static constexpr size_t kGhosts = 1024;

  std::unordered_map<uint64_t, Entry> map_ GUARDED_BY(mu);  // key.hash -> entry
  List lists_[3] GUARDED_BY(mu);
  uint64_t evictions_[3] GUARDED_BY(mu) = {0, 0, 0};
  uint64_t refused_ GUARDED_BY(mu) = 0;
  uint64_t admittedStaged_ GUARDED_BY(mu) = 0;
  // The owned entries linked at the hot end since generation gen_ began (read
  // in it) are a prefix of the owned list; oldestRead_ is its cold end (null:
  // none), the victim in epoch mode. Kept by link/unlink, reset by sync.
  uint32_t gen_ GUARDED_BY(mu) = 0;
  Entry* oldestRead_ GUARDED_BY(mu) = nullptr;
  uint64_t clock_ GUARDED_BY(mu) = 0;
  std::array<Ghost, kGhosts> ghosts_ GUARDED_BY(mu){};
};

}  // namespace epochfs::cache
