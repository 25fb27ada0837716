// UcxCluster: the callers' side of a fetch (any thread): the request handed
// to the progress thread, the wait, the reply's MAC and checksum checked here,
// off the progress thread; and what `epochctl peers` shows.
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <cstring>

#include "cache/checksum.h"
#include "transport/ucx_cluster.h"

namespace epochfs::transport {

using cache::Result;
using cache::Status;

Result<cache::ChunkRef> UcxCluster::fetch(const std::string& relPath, const cache::FileIdentity& id,
                                          const cache::ChunkKey& key) {
  const auto deadline = Clock::now() + cfg_.deadline;
  Status last = Status::unavailable("no live owner for " + relPath);
  for (uint32_t node : owners(id.fileId)) {
    if (node == cfg_.selfId) continue;
    auto r = fetchFrom(node, id, key, deadline);
    if (r.isOk()) return r;
    last = r.status();
    if (Clock::now() >= deadline) break;
  }
  return last;
}

Result<cache::ChunkRef> UcxCluster::fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                                  uint32_t index) {
  if (node >= peers_.size() || node == cfg_.selfId) {
    return Status::invalidArgument("no such peer: " + std::to_string(node));
  }
  cache::ChunkKey key;
  key.fileId = id.fileId;
  key.chunkIndex = index;
  return fetchFrom(node, id, key, Clock::now() + cfg_.deadline);
}

Result<cache::ChunkRef> UcxCluster::fetchFrom(uint32_t node, const cache::FileIdentity& id,
                                              const cache::ChunkKey& key,
                                              Clock::time_point deadline) {
  Peer& peer = *peers_[node];
  auto p = std::make_shared<PendingFetch>();
  p->peer = node;
  p->key = key;
  p->id = id;
  p->deadline = deadline;
  // Sized here, not on the progress thread, to the largest reply so far (the
  // owners' chunk size; replies are never longer), no more than what is left
  // of the file: the chunk's exact length once a full chunk was seen. A reused
  // buffer needs neither zero-fill nor page faults.
  if (const uint64_t hint = replySizeHint_.load(std::memory_order_relaxed); hint > 0) {
    const uint64_t offset = uint64_t(key.chunkIndex) * hint;
    if (offset < id.size) p->data = receivePool_->acquire(std::min(hint, id.size - offset));
  }
  ClusterOp op;
  op.fetch = p;
  ops_.post(std::move(op));
  // The progress thread enforces the deadline; the margin is a backstop.
  if (!p->waitUntil(deadline + std::chrono::milliseconds(250))) {
    peer.timeouts.fetch_add(1, std::memory_order_relaxed);
    return Status::timedOut("peer " + peer.member.address() + " did not answer in time");
  }
  if (!p->status.isOk()) {
    peer.fetchErrors.fetch_add(1, std::memory_order_relaxed);
    if (p->status.code() == Status::Code::kNotFound || p->status.code() == Status::Code::kStale) {
      peer.fetchRefused.fetch_add(1, std::memory_order_relaxed);
    }
    return p->status;
  }
  const wire::Reply& r = p->reply;
  // The XXH3 checksum: with a MAC, computed piece by piece as the MAC reads
  // the bytes (one pass over them, not two).
  uint64_t checksum = 0;
  if (session_.integrity == wire::Integrity::kMac) {
    wire::Reply plain = r;
    plain.tag = Tag{};
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> xxh(XXH3_createState(),
                                                                 &XXH3_freeState);
    if (!xxh) return Status::unavailable("out of memory");
    XXH3_64bits_reset(xxh.get());
    const bool macOk = p->mac.verify(
        r.tag, wire::kToClient, r.counter, &plain, sizeof plain, p->data.data(), p->data.size(),
        [&xxh](const void* piece, size_t n) { XXH3_64bits_update(xxh.get(), piece, n); });
    if (!macOk) {
      peer.fetchErrors.fetch_add(1, std::memory_order_relaxed);
      peer.macFailures.fetch_add(1, std::memory_order_relaxed);
      spdlog::error(
          "cluster: reply from {} failed its MAC (forged or corrupted); fetching elsewhere",
          peer.member.address());
      noteBadReply(peer, "reply failed its MAC");
      return Status::corruption("reply MAC mismatch from " + peer.member.address());
    }
    checksum = XXH3_64bits_digest(xxh.get());
  } else {
    checksum = cache::checksum(p->data.data(), p->data.size());
  }
  auto chunk = std::make_unique<cache::Chunk>();
  chunk->key = key;
  chunk->identity = id;
  chunk->checksum = r.checksum;
  if (p->data.capacity() > p->data.size() + (64u << 10)) {
    // Shorter than the hint (another chunk size): the exact size, the big buffer back to the pool.
    cache::ChunkBuffer exact = receivePool_->acquire(p->data.size());
    std::memcpy(exact.data(), p->data.data(), exact.size());
    receivePool_->release(std::exchange(p->data, std::move(exact)));
  }
  chunk->data = std::move(p->data);
  if (checksum != r.checksum) {
    peer.fetchErrors.fetch_add(1, std::memory_order_relaxed);
    peer.checksumFailures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("cluster: reply from {} failed its checksum; fetching elsewhere",
                  peer.member.address());
    noteBadReply(peer, "reply failed its checksum");
    return Status::corruption("reply checksum mismatch from " + peer.member.address());
  }
  peer.fetches.fetch_add(1, std::memory_order_relaxed);
  peer.bytesFetched.fetch_add(chunk->size(), std::memory_order_relaxed);
  // Its buffer returns to the pool when the last reference goes.
  return receivePool_->adopt(std::move(chunk));
}

void UcxCluster::noteBadReply(Peer& p, const std::string& why) {
  if (!health_->noteBadReply(p.member.id, why, Clock::now())) return;
  ClusterOp op;
  op.suspect = static_cast<int>(p.member.id);
  ops_.post(std::move(op));
}

std::vector<PeerInfo> UcxCluster::peers() const {
  std::vector<PeerInfo> out;
  const auto now = Clock::now();
  for (const auto& p : peers_) {
    const PeerHealth::Info h = health_->info(p->member.id, now);
    PeerInfo i;
    i.id = p->member.id;
    i.address = p->member.address();
    i.state = PeerHealth::stateName(h.state);
    i.live = h.state == State::kSelf || h.state == State::kUp;
    i.capacityBytes = h.capacityBytes;
    if (i.live) i.ownedBytes = placement_->ownedBytes(i.id);
    i.fetches = p->fetches.load();
    i.bytesFetched = p->bytesFetched.load();
    i.fetchErrors = p->fetchErrors.load();
    i.timeouts = p->timeouts.load();
    i.served = p->serving.served.load();
    i.bytesServed = p->serving.bytesServed.load();
    i.serveErrors = p->serving.serveErrors.load();
    i.authFailures = p->authFailures.load();
    i.connects = p->connects.load();
    i.macFailures = p->macFailures.load();
    i.checksumFailures = p->checksumFailures.load();
    i.serveRefused = p->serving.serveRefused.load();
    i.fetchRefused = p->fetchRefused.load();
    i.suspectCount = h.suspectCount;
    i.suspectForMs = h.suspectForMs;
    i.faultsInjected = p->serving.faultsInjected.load();
    i.lastError = h.lastError;
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace epochfs::transport
