// MrcModel: the miss-ratio curve of a known read sequence — for `epochctl
// mrc`, "how big must my cache be", answered without a trial run.
//
// The trace is one or more epochs' orders (entries: a file or a byte range of
// one), cut into chunk accesses exactly as the daemon cuts reads (chunk size
// from the mount, the last chunk of a file short). Byte hit ratios are
// computed for three policies at each cache size:
//
// - lru: LRU by bytes — the RAM tier without a registered order until it sees
//   epochs (then it evicts what the epoch has read first and does better:
//   cache/epoch_detector.h, not modelled here). Exact, for every size at
//   once, from byte-weighted stack distances (Fenwick tree): an access hits
//   iff the bytes of distinct chunks used since its previous use, itself
//   included, fit. The tier's shards (RamTier: up to 16, each at
//   least 32 MiB) are modelled by partitioning chunks over as many shards,
//   each with its share of the capacity: the mount's own partition when
//   setChunkShard() gave it (the daemon's chunk_shards), else the model's hash.
// - order_aware: the RAM tier with each epoch's order registered — what
//   epochfs does, simulated step by step: LRU list, a consumed entry's chunks
//   demoted to the cold end, and on eviction the chunk whose file is needed
//   farthest ahead in the current epoch's order among the 64 coldest
//   (RamTier::kVictimScan), a chunk needed later than that victim not admitted.
// - belady: the offline optimum for comparison — knows every epoch's order,
//   evicts the chunk used farthest in the future and never admits a chunk
//   used later than everything it would displace.
//
// Kernel page cache and prefetching are not modelled: the curve is the
// daemon's cache alone (prefetching fetches the same misses earlier).
// Ratios are reported over all epochs and over epochs after the first ("warm").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace epochfs::ctl {

// The RAM tier's own constants, as the daemon's `plans` reply gives them
// (`ram_tier`; cache/ram_tier.h); the defaults are what a daemon without
// that field runs with.
struct RamTierShape {
  unsigned maxShards = 16;
  uint64_t minShardBytes = 32ull << 20;
  int victimScan = 64;
};

class MrcModel {
 public:
  struct Entry {
    uint32_t file = 0;  // index into the file sizes
    uint64_t offset = 0;
    uint64_t length = 0;  // bytes from offset (clipped to the file)
  };
  struct Ratios {
    double all = 0, warm = 0;  // byte hit ratio over all epochs / epochs after the first
  };
  struct Point {
    uint64_t cacheBytes = 0;
    unsigned shards = 1;
    Ratios lru, orderAware, belady;
  };

  MrcModel(uint32_t chunkSize, std::vector<uint64_t> fileSizes, RamTierShape shape = {});

  // Appends one epoch (in read order).
  void addEpoch(const std::vector<Entry>& entries);

  // The RAM shard of a file's chunk among kMaxShards (0..15; with fewer
  // shards its low bits), as the mount places it.
  void setChunkShard(uint32_t file, uint32_t chunk, uint8_t shard);
  uint32_t fileChunks(uint32_t file) const;

  std::vector<Point> run(const std::vector<uint64_t>& cacheSizes) const;

  size_t epochs() const { return epochStarts_.size(); }
  size_t accesses() const { return accItem_.size(); }
  uint64_t accessedBytes() const { return accessedBytes_; }
  uint64_t warmBytes() const { return warmBytes_; }
  // Bytes of the distinct chunks the trace touches (no cache larger helps).
  uint64_t uniqueBytes() const;

  // RamTier's shard count for a capacity: doubling up to maxShards while each
  // shard keeps minShardBytes.
  unsigned shardsFor(uint64_t capacity) const;

 private:
  static constexpr uint32_t kNever = UINT32_MAX;
  RamTierShape shape_;
  static constexpr uint8_t kNoShard = 0xff;

  uint32_t shardOf(uint32_t item, unsigned shards) const;
  // Byte stack distance of every access under `shards` shards (UINT64_MAX: first use).
  std::vector<uint64_t> stackDistances(unsigned shards) const;
  Ratios lru(const std::vector<uint64_t>& dist, uint64_t capacity, unsigned shards) const;
  Ratios orderAware(uint64_t capacity, unsigned shards) const;
  Ratios belady(uint64_t capacity) const;
  Ratios ratios(const std::vector<uint8_t>& hit) const;

  uint32_t chunkSize_;
  std::vector<uint64_t> fileSizes_;
  std::vector<uint32_t> itemBase_;   // first chunk item of each file
  std::vector<uint32_t> itemBytes_;  // bytes of each chunk item
  std::vector<uint32_t> itemFile_;   // file of each chunk item
  std::vector<uint8_t> itemShard_;   // the mount's shard of each item (kNoShard: unknown)
  // The trace: one access per chunk per entry.
  std::vector<uint32_t> accItem_;
  std::vector<uint8_t> accWarm_;             // 1 in epochs after the first
  std::vector<uint32_t> entryFile_;          // per entry (all epochs)
  std::vector<uint32_t> entryFirst_;         // first access of each entry
  std::vector<uint32_t> entrySameFileNext_;  // next entry of the same file in its epoch
  std::vector<uint32_t> epochStarts_;        // first entry of each epoch
  uint64_t accessedBytes_ = 0, warmBytes_ = 0;
};

}  // namespace epochfs::ctl
