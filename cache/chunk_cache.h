// ChunkCache: the read path below FUSE. For one chunk of one file version it
// tries the RAM tier, then the disk tier (checksum verified there), then the
// source; a chunk read from the source gets its checksum and is admitted to
// both tiers (the disk tier write-through, so a RAM eviction loses nothing).
// Concurrent misses on one chunk are fetched once: followers wait for the
// leader's result. In a cluster, chunks of files other nodes own come from
// their owner and enter the RAM tier as guests (ram_tier.h), never the disk
// tier. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "cache/cache_stats.h"
#include "cache/chunk.h"
#include "cache/chunk_store.h"
#include "cache/lease.h"
#include "cache/mutex.h"
#include "cache/peer_source.h"
#include "cache/ram_tier.h"
#include "cache/revocable.h"
#include "cache/source.h"

namespace epochfs::cache {

class ChunkCache {
 public:
  struct Options {
    uint64_t datasetId = 0;
    uint32_t chunkSize = 1 << 20;
  };

  // `ram` is required; `disk` may be null (no disk tier). Not owned.
  ChunkCache(const Options& options, Source& source, RamTier& ram, ChunkStore* disk);

  // Joins a cluster until the lease ends: misses of files other nodes own are
  // asked of them first. Lend before reads start; ending the lease waits for
  // the peer calls in progress (a fetch ends within the transport's timeout).
  Lease lendPeers(PeerSource& peers) { return peers_.lend(peers); }
  // True when a peer owns the file (a miss would go to the network).
  bool ownedElsewhere(uint64_t fileId) const {
    const auto peers = peers_.use();
    return peers && peers->ownedElsewhere(fileId);
  }

  // As get(), for the prefetcher: a chunk fetched from its owner peer enters
  // the RAM tier as a staged guest (RamTier::stage). Coalesces with demand reads.
  Result<ChunkRef> stage(const std::string& relPath, const FileIdentity& id, uint32_t index);

  // As get(), for a request that came from a peer: never asks peers again
  // (this node is the owner, or the asker falls back to its own source).
  Result<ChunkRef> getForPeer(const std::string& relPath, const FileIdentity& id, uint32_t index);

  // Ordered from cheapest to dearest (a read's worst piece decides). kStaging:
  // a staged guest of the RAM tier (peer prefetch got there first).
  enum class Tier { kRam, kStaging, kDisk, kPeer, kSource };

  // Chunk `index` of the file `relPath` at version `id`. Never returns bytes
  // of another version: a changed source file yields kStale. `from` (if set)
  // tells which tier had it.
  Result<ChunkRef> get(const std::string& relPath, const FileIdentity& id, uint32_t index,
                       Tier* from = nullptr);

  // Counts `bytes` served to a reader from tier `from` (stats per tier are
  // bytes handed to readers, not chunk sizes).
  void countServed(Tier from, uint64_t bytes);

  // Drops every cached chunk of a file (all tiers), e.g. after it changed.
  void invalidate(const FileIdentity& id);

  ChunkKey keyFor(uint64_t fileId, uint32_t index) const {
    return ChunkKey::make(options_.datasetId, fileId, index);
  }
  uint32_t chunkSize() const { return options_.chunkSize; }
  uint32_t chunkCount(uint64_t fileSize) const {
    return fileSize == 0
               ? 0
               : static_cast<uint32_t>((fileSize + options_.chunkSize - 1) / options_.chunkSize);
  }
  CacheStats& stats() { return stats_; }
  // Distinct chunks being fetched now (coalescing leaders); 0 when idle.
  size_t inflightFetches() const {
    MutexLock lock(inflightMu_);
    return inflight_.size();
  }
  RamTier& ram() { return ram_; }
  bool clustered() const { return peers_.lent(); }
  ChunkStore* disk() { return disk_; }

 private:
  struct InFlight {
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
    Result<ChunkRef> result GUARDED_BY(mu){Status::unavailable("pending")};
  };

  Result<ChunkRef> lookupOrFetch(const std::string& relPath, const FileIdentity& id, uint32_t index,
                                 Tier* from, bool askPeers, bool toStaging = false);
  // The miss path of the coalescing leader: the owner peer, then the source.
  Result<ChunkRef> fetch(const std::string& relPath, const FileIdentity& id, const ChunkKey& key,
                         bool askPeers, bool toStaging, Tier* from);
  // The data length of chunk `index` of version `id` (0 past the end).
  uint64_t expectedLength(const FileIdentity& id, uint32_t index) const;
  Result<ChunkRef> fetchFromSource(const std::string& relPath, const FileIdentity& id,
                                   const ChunkKey& key);

  Options options_;
  Source& source_;
  RamTier& ram_;
  ChunkStore* disk_;
  Revocable<PeerSource> peers_;
  CacheStats stats_;
  mutable Mutex inflightMu_;  // never held during I/O
  std::unordered_map<uint64_t, std::shared_ptr<InFlight>> inflight_ GUARDED_BY(inflightMu_);
};

}  // namespace epochfs::cache
