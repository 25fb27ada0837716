// RamTier: the in-memory chunk tier. Owns references to the chunks it holds
// (ChunkRef), bounded by byte budgets on the chunks' data bytes.
//
// Two classes of chunk (docs/CLUSTER.md "Capacity"):
// - owned: this node is among the file's live owners (every chunk outside a
//   cluster). At most `capacityBytes`. An owned chunk is evicted only to make
//   room for another owned chunk, i.e. only when the node's share exceeds the
//   tier. With a live EvictionAdvisor (an access plan is registered), by
//   farthest next use: among the kVictimScan coldest owned entries the one
//   needed last goes, and a chunk needed later than that victim is not
//   admitted at all (Belady's rule with admission control). Without one, by
//   least recent use, unless the reads come in epochs (EpochDetector, cache/
//   epoch_detector.h: every file read once per epoch in a fresh order, told
//   from re-reads of hot files): then the chunk read longest ago *in the
//   current epoch* goes first, since it will not be read again before the
//   next epoch while every colder one may be; only when the epoch has read
//   none left does the coldest go (hit ratio ≈ C/D where LRU hits below).
// - guests: copies of chunks other nodes own. They live only in the room the
//   owned chunks leave free plus `guestExtraBytes` (the prefetch memory), go
//   first whenever an owned chunk needs room, are kept in their own LRU list (a
//   hit moves a guest to the front of the guests, never above an owned chunk)
//   and never go to disk (ChunkCache writes through only source reads of the
//   own share). A guest fetched ahead of its read by peer prefetch is
//   *staged*: it is not evicted for other guests until its read was consumed
//   or it is stale (`staleAfter` unread: its reader left the plan). Staged
//   guests together stay within `guestExtraBytes`; when fresh ones fill that,
//   the next is refused.
// Which class a chunk belongs to is asked of an OwnershipView at insert; after
// a membership change reclassify() moves every chunk to its new class in place
// (no re-read). The advisor and the view are lent to the tier by their owners
// (lendAdvisor/lendOwnership return a Lease, cache/revocable.h): the tier holds
// each for the length of one call, and ending the lease waits for that call.
//
// Sharded by key hash: each shard has its own mutex, hash map and lists and an
// equal slice of both budgets (as LevelDB's ShardedLRUCache), so FUSE workers
// rarely contend. Small caches use fewer shards, so that every shard holds at
// least kMinShardBytes and a 1 MiB chunk always fits when the capacity is at
// least 1 MiB (a single shard below 2 * kMinShardBytes).
//
// Thread-safety: every method may be called from any thread concurrently. A
// lookup hit takes one shard lock, moves the entry to the front of its list in
// place, stamps it for the EpochDetector (atomic loads; two shared counters
// added to on a chunk's first read in an epoch) and copies a shared_ptr: it
// does not allocate. Chunks are immutable and
// were checksummed when built; a hit does not re-hash them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cache/chunk_store.h"
#include "cache/epoch_detector.h"
#include "cache/eviction_advisor.h"
#include "cache/lease.h"
#include "cache/ownership_view.h"
#include "cache/revocable.h"

namespace epochfs::cache {

class RamTier : public ChunkStore {
 public:
  static constexpr size_t kMaxShards = 16;
  static constexpr uint64_t kMinShardBytes = 32ull << 20;
  static constexpr int kVictimScan = 64;

  // What one class holds, and what it lost to make room.
  struct ClassUsage {
    uint64_t bytes = 0;
    uint64_t chunks = 0;
    uint64_t evictions = 0;  // dropped to make room, since start
  };
  // The staged guests (peer prefetch), a subset of the guests.
  struct StagedUsage {
    uint64_t bytes = 0;
    uint64_t chunks = 0;
    uint64_t admitted = 0;       // staged since start
    uint64_t refused = 0;        // refused: the budget was full of fresh staged guests
    uint64_t droppedUnread = 0;  // stale staged guests dropped for room
  };

  explicit RamTier(uint64_t capacityBytes, uint64_t guestExtraBytes = 0,
                   std::chrono::milliseconds staleAfter = std::chrono::seconds(10));
  ~RamTier() override;
  RamTier(const RamTier&) = delete;
  RamTier& operator=(const RamTier&) = delete;

  ChunkRef lookup(const ChunkKey& key, const FileIdentity& id) override {
    return find(key, id, nullptr);
  }
  // As lookup(); `staged` (if set) tells whether the hit was a staged guest.
  // Virtual so that tests can hold a reader between a miss and its fetch.
  virtual ChunkRef find(const ChunkKey& key, const FileIdentity& id, bool* staged);
  // Admits a chunk in its class (OwnershipView); replaces an entry with the
  // same key. Refuses (false) a null chunk, one larger than maxChunkBytes(),
  // a guest that does not fit beside the owned chunks, and an owned chunk that
  // the advisor says is needed later than everything it could evict.
  bool insert(const ChunkRef& chunk) override;
  // Admits a guest fetched ahead of its read (peer prefetch) as staged.
  bool stage(const ChunkRef& chunk);
  // Bytes stage() would take now without refusing: the extra (the prefetch
  // memory) less the fresh staged guests.
  uint64_t stagingRoom() const;
  // Peer prefetch found the chunk resident already: a plain guest becomes
  // staged (kept for its read like a fetched one); owned chunks are left as
  // they are.
  void claimStaged(const ChunkKey& key);
  bool contains(const ChunkKey& key) const override;
  void erase(const ChunkKey& key) override;
  // The chunk's read was consumed: it becomes the first to go of its class
  // (a staged guest becomes a plain guest).
  void demote(const ChunkKey& key) override;
  // As demote(), and a guest leaves the tier at once (its next use is beyond
  // the prefetch window: keeping it would only take room).
  void release(const ChunkKey& key);
  // bytesUsed counts chunk data bytes of both classes; corruptions is always 0
  // (RAM chunks are not re-verified). Evictions count chunks dropped to make
  // room only.
  TierUsage usage() const override;
  ClassUsage owned() const;
  ClassUsage guests() const;
  StagedUsage staged() const;

  // Drops every chunk (not counted as evictions) but the staged guests: they
  // are peer prefetch's fetches waiting for their read (the prefetcher's, not
  // the cache's), and leave when read, consumed or stale.
  void clear();

  // Lends the tier the advisor consulted on eviction until the lease ends
  // (none lent: plain LRU). Ending the lease waits for an insert consulting
  // it; lending again ends the previous lease.
  Lease lendAdvisor(const EvictionAdvisor& advisor) { return advisor_.lend(advisor); }
  // Lends the view that sorts chunks into classes until the lease ends (none
  // lent: all owned), as lendAdvisor(). Call reclassify() after the view's
  // answers changed (or it was lent or taken back).
  Lease lendOwnership(const OwnershipView& view) { return ownership_.lend(view); }
  // Moves every chunk to the class the view gives it now, then evicts what no
  // longer fits (guests first). Returns the chunks that changed class.
  uint64_t reclassify();

  // The epoch detection of the eviction without an advisor (above).
  EpochDetector::State epochs() const { return epochs_.state(); }

  size_t shardCount() const { return shardCount_; }
  // The shard a key hash lands in among `shardCount` (a power of two up to
  // kMaxShards). With fewer shards the index is the low bits of the index
  // among kMaxShards: `chunk_shards` (epochctl mrc) relies on that.
  static size_t shardIndex(uint64_t keyHash, size_t shardCount) {
    // The map buckets use the low bits; pick shards with higher ones.
    return (keyHash >> 40) & (shardCount - 1);
  }
  // The guests' room beyond what the owned chunks leave free (the prefetch
  // memory): the staging room peer prefetch can count on.
  uint64_t guestExtraBytes() const { return guestExtra_; }
  // The largest chunk insert() accepts: the capacity of one shard.
  uint64_t maxChunkBytes() const;

  // Caps the whole tier (both classes, as usage().capacityBytes) at `bytes`,
  // at most what it was built with, and evicts down to it at once: the guests'
  // extra shrinks first, then the owned budget (the guests in the room it
  // left go before any owned chunk; owned chunks then go as for an insert
  // without an advisor: coldest first, in epoch mode what the epoch read).
  // A larger value grows it back, up to the built budgets. For a daemon under
  // memory pressure (fusefs/daemon/memory_pressure_watcher.h).
  void setCapacity(uint64_t bytes);

 private:
  // A chunk's class; staged guests are guests fetched ahead of their read.
  enum Class : uint8_t { kOwned = 0, kGuest = 1, kStaged = 2 };
  class Shard;
  struct Totals;
  Totals totals() const;
  Shard& shardFor(uint64_t hash) const;
  // Calls fn(const Shard&) for every shard, each under its lock in turn (fn
  // says so to the analysis with s.mu.assertHeld()).
  template <typename Fn>
  void forEachShard(Fn&& fn) const;
  static bool isGuest(const OwnershipView* view, const ChunkKey& key) {
    return view != nullptr && !view->ownedHere(key.fileId);
  }
  bool admit(const ChunkRef& chunk, Class cls);

  Revocable<const EvictionAdvisor> advisor_;
  Revocable<const OwnershipView> ownership_;
  const uint64_t capacity_;  // as built; setCapacity() lowers the shards' budgets
  const uint64_t guestExtra_;
  std::atomic<uint64_t> limit_;  // setCapacity()'s cap on both classes
  EpochDetector epochs_;
  size_t shardCount_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace epochfs::cache
