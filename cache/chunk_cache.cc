#include "cache/chunk_cache.h"

#include <algorithm>
#include <chrono>

namespace epochfs::cache {

ChunkCache::ChunkCache(const Options& options, Source& source, RamTier& ram, ChunkStore* disk)
    : options_(options), source_(source), ram_(ram), disk_(disk) {}

void ChunkCache::countServed(Tier from, uint64_t bytes) {
  switch (from) {
    case Tier::kRam:
      return stats_.ram.add(bytes);
    case Tier::kStaging:
      return stats_.staging.add(bytes);
    case Tier::kDisk:
      return stats_.disk.add(bytes);
    case Tier::kPeer:
      return stats_.peer.add(bytes);
    case Tier::kSource:
      return stats_.source.add(bytes);
  }
}

Result<ChunkRef> ChunkCache::get(const std::string& relPath, const FileIdentity& id, uint32_t index,
                                 Tier* from) {
  return lookupOrFetch(relPath, id, index, from, clustered());
}

Result<ChunkRef> ChunkCache::getForPeer(const std::string& relPath, const FileIdentity& id,
                                        uint32_t index) {
  return lookupOrFetch(relPath, id, index, nullptr, false);
}

Result<ChunkRef> ChunkCache::stage(const std::string& relPath, const FileIdentity& id,
                                   uint32_t index) {
  return lookupOrFetch(relPath, id, index, nullptr, clustered(), clustered());
}

Result<ChunkRef> ChunkCache::lookupOrFetch(const std::string& relPath, const FileIdentity& id,
                                           uint32_t index, Tier* from, bool askPeers,
                                           bool toStaging) {
  const ChunkKey key = keyFor(id.fileId, index);
  Tier dummy;
  Tier& tier = from != nullptr ? *from : dummy;
  bool staged = false;
  if (ChunkRef c = ram_.find(key, id, &staged)) {
    tier = staged ? Tier::kStaging : Tier::kRam;
    // Peer prefetch wants a guest that is here already: keep it for the read.
    if (toStaging && !staged) ram_.claimStaged(key);
    return c;
  }
  if (disk_ != nullptr) {
    tier = Tier::kDisk;
    if (ChunkRef c = disk_->lookup(key, id)) {
      // The record verified, but a record of the wrong length (e.g. an empty
      // one) must not become a short read: it is damage, re-read from the source.
      if (c->size() == expectedLength(id, index)) {
        ram_.insert(c);
        return c;
      }
      disk_->eraseCorrupt(key);
    }
  }
  // Followers of a coalesced fetch count as source reads too: the bytes were
  // not in any tier when they asked.
  tier = Tier::kSource;

  // Miss: the first thread to get here fetches; the others wait for it.
  std::shared_ptr<InFlight> flight;
  bool leader = false;
  {
    MutexLock lock(inflightMu_);
    auto [it, inserted] = inflight_.try_emplace(key.hash);
    if (inserted) it->second = std::make_shared<InFlight>();
    flight = it->second;
    leader = inserted;
  }
  if (!leader) {
    stats_.coalesced.fetch_add(1, std::memory_order_relaxed);
    if (askPeers && ownedElsewhere(id.fileId)) tier = Tier::kPeer;  // waits on the network
    MutexLock lock(flight->mu);
    flight->cv.wait(flight->mu, [&]() REQUIRES(flight->mu) { return flight->done; });
    // The leader may have fetched another version of the file; only share
    // its result when the versions agree.
    if (flight->result.isOk() && !(flight->result.value()->identity == id)) {
      return Status::stale(relPath + " changed while being read");
    }
    return flight->result;
  }

  // A previous leader may have finished between our lookup and our
  // registration: look again before reading anything.
  ChunkRef again = ram_.find(key, id, &staged);
  if (again) tier = staged ? Tier::kStaging : Tier::kRam;
  Result<ChunkRef> result =
      again ? Result<ChunkRef>(again) : fetch(relPath, id, key, askPeers, toStaging, &tier);
  {
    MutexLock lock(flight->mu);
    flight->result = result;
    flight->done = true;
  }
  flight->cv.notifyAll();
  {
    MutexLock lock(inflightMu_);
    inflight_.erase(key.hash);
  }
  return result;
}

Result<ChunkRef> ChunkCache::fetch(const std::string& relPath, const FileIdentity& id,
                                   const ChunkKey& key, bool askPeers, bool toStaging, Tier* from) {
  if (askPeers) {
    // The peers are held for the peer fetch only, not for the source read.
    const auto peers = peers_.use();
    if (peers && peers->ownedElsewhere(id.fileId)) {
      Result<ChunkRef> r = peers->fetch(relPath, id, key);
      // No second XXH3 pass here: PeerSource::fetch returns verified chunks
      // (transport/ checks the checksum in the same pass as the payload MAC).
      if (r.isOk() && r.value()->identity == id && r.value()->key == key) {
        stats_.peerReads.add(r.value()->size());
        *from = Tier::kPeer;
        if (toStaging) {  // peer prefetch: held until its read is consumed
          stats_.stagedReads.add(r.value()->size());
          ram_.stage(r.value());
          return r;
        }
        // Another node's share: a guest of the RAM tier (room the own share
        // leaves), never on disk.
        ram_.insert(r.value());
        return r;
      }
      stats_.peerErrors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  *from = Tier::kSource;
  return fetchFromSource(relPath, id, key);
}

uint64_t ChunkCache::expectedLength(const FileIdentity& id, uint32_t index) const {
  const uint64_t offset = static_cast<uint64_t>(index) * options_.chunkSize;
  return offset >= id.size ? 0 : std::min<uint64_t>(options_.chunkSize, id.size - offset);
}

Result<ChunkRef> ChunkCache::fetchFromSource(const std::string& relPath, const FileIdentity& id,
                                             const ChunkKey& key) {
  const uint64_t offset = static_cast<uint64_t>(key.chunkIndex) * options_.chunkSize;
  if (offset >= id.size && !(offset == 0 && id.size == 0)) {
    return Status::invalidArgument("chunk beyond end of " + relPath);
  }
  const size_t want = static_cast<size_t>(std::min<uint64_t>(options_.chunkSize, id.size - offset));
  const auto start = std::chrono::steady_clock::now();
  Result<ChunkBuffer> data = source_.readChunk(relPath, id, offset, want);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  stats_.sourceLatency.record(static_cast<uint64_t>(micros));
  if (!data.isOk()) {
    stats_.sourceErrors.fetch_add(1, std::memory_order_relaxed);
    return data.status();
  }
  if (data->size() != want) {
    // The file shrank under us although its identity matched: treat as changed.
    stats_.sourceErrors.fetch_add(1, std::memory_order_relaxed);
    return Status::stale(relPath + " is shorter than its snapshot");
  }
  stats_.sourceReads.add(want);
  ChunkRef chunk = makeChunk(key, id, std::move(data).value());
  ram_.insert(chunk);
  // Write-through of this node's own share only: a file another node owns
  // (read here because its owner failed) stays a guest, in RAM.
  if (disk_ != nullptr && !ownedElsewhere(id.fileId)) disk_->insert(chunk);
  return chunk;
}

void ChunkCache::invalidate(const FileIdentity& id) {
  const uint32_t n = std::max<uint32_t>(1, chunkCount(id.size));
  for (uint32_t i = 0; i < n; ++i) {
    const ChunkKey key = keyFor(id.fileId, i);
    ram_.erase(key);
    if (disk_ != nullptr) disk_->erase(key);
  }
}

}  // namespace epochfs::cache
