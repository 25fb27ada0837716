// UcxCluster: the active-message protocol (wire_format.h) — handshake,
// requests and replies — plus the callers' fetch(). Serving: chunk_server.cc.
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <cstring>

#include "cache/checksum.h"
#include "transport/ucx_cluster.h"
#include "transport/wire_decoder.h"

namespace epochfs::transport {

using cache::Result;
using cache::Status;

namespace {

struct SendCtx {
  std::vector<uint8_t> header;
  cache::ChunkRef chunk;
};

struct RecvCtx {
  UcxCluster* self;
  std::shared_ptr<void> pending;  // keeps the buffer alive past a timeout
  std::function<void(ucs_status_t)> done;
};

// What the asker makes of an owner's refusal code.
Status refusal(uint32_t code, const std::string& owner) {
  switch (static_cast<Status::Code>(code)) {
    case Status::Code::kNotFound:
      return Status::notFound("owner " + owner +
                              " refused: the file is not in its dataset snapshot");
    case Status::Code::kStale:
      return Status::stale("owner " + owner + " refused: it holds another version of the file");
    case Status::Code::kTimedOut:
      return Status::timedOut("owner " + owner + " answered too late to serve");
    default:
      return Status::unavailable("owner " + owner + " answered code " + std::to_string(code));
  }
}

}  // namespace

// ---- sending ------------------------------------------------------------------

bool UcxCluster::sendAm(ucp_ep_h ep, uint16_t id, const void* header, size_t headerLen,
                        cache::ChunkRef chunk) {
  auto* ctx = new SendCtx;
  ctx->header.assign(static_cast<const uint8_t*>(header),
                     static_cast<const uint8_t*>(header) + headerLen);
  ctx->chunk = std::move(chunk);
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_REPLY;
  rp.cb.send = &UcxCluster::onSendDone;
  rp.user_data = ctx;
  const void* data = ctx->chunk ? ctx->chunk->data.data() : nullptr;
  const size_t len = ctx->chunk ? ctx->chunk->data.size() : 0;
  void* r = ucp_am_send_nbx(ep, id, ctx->header.data(), ctx->header.size(), data, len, &rp);
  if (r == nullptr) {
    delete ctx;
    return true;
  }
  if (UCS_PTR_IS_ERR(r)) {
    spdlog::debug("cluster: send failed: {}", ucs_status_string(UCS_PTR_STATUS(r)));
    delete ctx;
    return false;
  }
  return true;
}

void UcxCluster::onSendDone(void* request, ucs_status_t status, void* user) {
  delete static_cast<SendCtx*>(user);
  ucp_request_free(request);
}

void UcxCluster::sendRequest(const std::shared_ptr<Pending>& p) {
  Peer& peer = *peers_[p->peer];
  if (peer.state.load() != static_cast<int>(State::kUp) || peer.ep == nullptr) {
    return complete(p, Status::unavailable("peer " + peer.member.address() + " is not up"));
  }
  if (peer.inFlight >= cfg_.maxInFlightPerPeer) {
    return complete(p,
                    Status::unavailable("too many requests in flight to " + peer.member.address()));
  }
  const auto now = Clock::now();
  if (p->deadline <= now) return complete(p, Status::timedOut("deadline passed before sending"));
  wire::Request r;
  r.reqId = p->reqId = nextReqId_++;
  r.fileId = p->id.fileId;
  r.size = p->id.size;
  r.mtimeNs = p->id.mtimeNs;
  r.ctimeNs = p->id.ctimeNs;
  r.inode = p->id.inode;
  r.chunkIndex = p->key.chunkIndex;
  r.deadlineMs = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(p->deadline - now).count());
  r.counter = macCounter_.fetch_add(1);
  if (integrity_ == wire::Integrity::kMac) {
    r.tag = peer.mac.sign(wire::kToServer, r.counter, &r, sizeof r, nullptr, 0);
  }
  p->mac = peer.mac;
  pending_[r.reqId] = p;
  ++peer.inFlight;
  if (!sendAm(peer.ep, wire::kRequest, &r, sizeof r, nullptr)) {
    complete(p, Status::unavailable("cannot send to " + peer.member.address()));
  }
}

void UcxCluster::sendReply(Op& op) {
  auto it = inboundById_.find(op.connId);
  if (it == inboundById_.end()) return;  // the asker went away
  sendAm(it->second, wire::kReply, &op.reply, sizeof op.reply, std::move(op.chunk));
}

// ---- receiving --------------------------------------------------------------------

ucs_status_t UcxCluster::amTrampoline(void* arg, const void* header, size_t headerLen, void* data,
                                      size_t len, const ucp_am_recv_param_t* param) {
  auto* a = static_cast<AmArg*>(arg);
  return a->self->onAm(a->id, header, headerLen, data, len, param);
}

ucs_status_t UcxCluster::onAm(uint16_t id, const void* header, size_t headerLen, void* data,
                              size_t len, const ucp_am_recv_param_t* param) {
  ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  auto msg = wire::decodeAm(id, header, headerLen, len);
  if (!msg.isOk()) {
    // A peer that sends malformed messages is cut off: its pending requests
    // fail now (and fall back to the source) instead of timing out.
    spdlog::debug("cluster: malformed message: {}", msg.status().message());
    if (ep != nullptr && wire::isClientToServer(id)) {
      dropInbound(ep, msg.status().message());
    } else if (Peer* p = ep != nullptr ? peerByEp(ep) : nullptr; p != nullptr) {
      peerFailed(*p, State::kDown, msg.status().message());
    }
  } else if (id == wire::kReply) {
    if (ep != nullptr) return onReply(ep, std::get<wire::Reply>(msg->body), data, len, param);
  } else if (ep != nullptr) {
    const auto& body = msg->body;
    if (id == wire::kHello) onHello(ep, std::get<wire::Hello>(body));
    if (id == wire::kChallenge) onChallenge(ep, std::get<wire::Hello>(body));
    if (id == wire::kProof) onProof(ep, std::get<wire::Proof>(body));
    if (id == wire::kWelcome) onWelcome(ep, std::get<wire::Welcome>(body));
    if (id == wire::kRequest) onRequest(ep, std::get<wire::Request>(body));
    if (id == wire::kPing) {
      if (Inbound* in = inboundByEp(ep); in != nullptr && in->authed) {
        sendAm(ep, wire::kPong, &std::get<wire::Ping>(body), sizeof(wire::Ping), nullptr);
      }
    }
    if (id == wire::kPong) {
      if (Peer* p = peerByEp(ep); p != nullptr &&
                                  p->state.load() == static_cast<int>(State::kSuspect) &&
                                  Clock::now() >= p->suspectUntil) {
        spdlog::info("cluster: peer {} ({}) answers again", p->member.id, p->member.address());
        setState(*p, State::kUp);
      }
    }
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ucp_am_data_release(worker_, data);
  return UCS_OK;
}

void UcxCluster::onHello(ucp_ep_h ep, const wire::Hello& h) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  if (in->challenged) return dropInbound(ep, "a second hello");
  if (h.magic != wire::kMagic || h.version != wire::kVersion) {
    return dropInbound(ep, "not an epochfs peer (bad magic/version)");
  }
  if (h.memberCount != cfg_.members.size() || h.nodeId >= cfg_.members.size() ||
      h.nodeId == cfg_.selfId) {
    return dropInbound(ep, "node " + std::to_string(h.nodeId) + " of " +
                               std::to_string(h.memberCount) + " is not a member of this job");
  }
  if (h.integrity != static_cast<uint8_t>(integrity_)) {
    return dropInbound(ep, "--peer-integrity differs between the nodes");
  }
  in->challenged = true;
  in->remote = h.nodeId;
  in->clientNonce = h.nonce;
  in->serverNonce = randomNonce();
  wire::Hello c;
  c.integrity = static_cast<uint8_t>(integrity_);
  c.nodeId = cfg_.selfId;
  c.memberCount = static_cast<uint32_t>(cfg_.members.size());
  c.capacity = cfg_.capacityBytes;
  c.nonce = in->serverNonce;
  c.proof =
      handshakeProof(cfg_.secret, 'S', in->clientNonce, in->serverNonce, in->remote, cfg_.selfId);
  sendAm(ep, wire::kChallenge, &c, sizeof c, nullptr);
}

void UcxCluster::onChallenge(ucp_ep_h ep, const wire::Hello& h) {
  Peer* p = peerByEp(ep);
  if (p == nullptr || p->state.load() != static_cast<int>(State::kConnecting)) return;
  const Digest want =
      handshakeProof(cfg_.secret, 'S', p->clientNonce, h.nonce, cfg_.selfId, p->member.id);
  if (h.magic != wire::kMagic || h.nodeId != p->member.id ||
      !equalDigests(h.proof.data(), want.data(), want.size())) {
    p->authFailures.fetch_add(1);
    spdlog::error("cluster: peer {} ({}) failed authentication (another job's secret?); refused",
                  p->member.id, p->member.address());
    return peerFailed(*p, State::kRefused, "failed authentication");
  }
  wire::Proof pr;
  pr.proof = handshakeProof(cfg_.secret, 'C', p->clientNonce, h.nonce, cfg_.selfId, p->member.id);
  p->mac = PayloadMac(sessionKey(cfg_.secret, p->clientNonce, h.nonce));
  p->capacity = h.capacity;
  if (!sendAm(ep, wire::kProof, &pr, sizeof pr, nullptr))
    peerFailed(*p, State::kDown, "send failed");
}

void UcxCluster::onProof(ucp_ep_h ep, const wire::Proof& m) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  if (!in->challenged || in->authed) return dropInbound(ep, "proof out of turn");
  const Digest want =
      handshakeProof(cfg_.secret, 'C', in->clientNonce, in->serverNonce, in->remote, cfg_.selfId);
  if (!equalDigests(m.proof.data(), want.data(), want.size())) {
    if (in->remote < peers_.size()) peers_[in->remote]->authFailures.fetch_add(1);
    spdlog::error("cluster: refused a connection claiming node {}: bad proof (wrong secret?)",
                  in->remote);
    return dropInbound(ep, "");
  }
  in->authed = true;
  in->mac = PayloadMac(sessionKey(cfg_.secret, in->clientNonce, in->serverNonce));
  wire::Welcome w;
  w.tag = in->mac.sign(wire::kWelcomeDir, 0, "welcome", 7, nullptr, 0);
  sendAm(ep, wire::kWelcome, &w, sizeof w, nullptr);
}

void UcxCluster::onWelcome(ucp_ep_h ep, const wire::Welcome& m) {
  Peer* p = peerByEp(ep);
  if (p == nullptr || p->state.load() != static_cast<int>(State::kConnecting) || !p->mac.valid())
    return;
  if (!p->mac.verify(m.tag, wire::kWelcomeDir, 0, "welcome", 7, nullptr, 0)) {
    p->authFailures.fetch_add(1);
    spdlog::error("cluster: peer {} ({}) sent a forged welcome; refused", p->member.id,
                  p->member.address());
    return peerFailed(*p, State::kRefused, "forged welcome");
  }
  p->backoffMs = 250;
  p->connects.fetch_add(1);
  if (Clock::now() < p->suspectUntil) {
    // Reconnecting does not end a suspicion for bad payloads.
    p->nextPing = p->suspectUntil;
    return setState(*p, State::kSuspect);
  }
  setLastError(*p, "");
  setState(*p, State::kUp);
}

void UcxCluster::onRequest(ucp_ep_h ep, const wire::Request& r) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  if (!in->authed) return dropInbound(ep, "request before authentication");
  if (r.counter <= in->lastCounter) return dropInbound(ep, "replayed request");
  if (integrity_ == wire::Integrity::kMac) {
    wire::Request plain = r;
    plain.tag = Tag{};
    if (!in->mac.verify(r.tag, wire::kToServer, r.counter, &plain, sizeof plain, nullptr, 0)) {
      peers_[in->remote]->authFailures.fetch_add(1);
      return dropInbound(ep, "request with a bad MAC (forged?)");
    }
  }
  in->lastCounter = r.counter;
  if (server_->submit(ChunkServer::Task{in->connId, in->remote, r, Clock::now(), in->mac})) return;
  Op op;
  op.connId = in->connId;
  op.reply.reqId = r.reqId;
  op.reply.code = static_cast<uint32_t>(Status::Code::kUnavailable);
  op.reply.counter = macCounter_.fetch_add(1);
  if (integrity_ == wire::Integrity::kMac) {
    op.reply.tag =
        in->mac.sign(wire::kToClient, op.reply.counter, &op.reply, sizeof op.reply, nullptr, 0);
  }
  peers_[in->remote]->serving.serveErrors.fetch_add(1);
  sendReply(op);
}

ucs_status_t UcxCluster::onReply(ucp_ep_h ep, const wire::Reply& r, void* data, size_t len,
                                 const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  auto it = pending_.find(r.reqId);
  if (it == pending_.end() || peers_[it->second->peer]->ep != ep) {
    if (rndv) ucp_am_data_release(worker_, data);  // late (timed out) or unknown
    return UCS_OK;
  }
  std::shared_ptr<Pending> p = it->second;
  p->reply = r;
  if (r.code != 0 || r.length != len || len > (64u << 20)) {
    if (rndv) ucp_am_data_release(worker_, data);
    complete(p, r.code != 0 ? refusal(r.code, peers_[p->peer]->member.address())
                            : Status::corruption("reply length mismatch"));
    return UCS_OK;
  }
  if (p->data.capacity() < len) {
    // Larger than fetchFrom's guess: a buffer of the right size from the pool,
    // the small one back to it. (Not resize(): that copies the old bytes into
    // a fresh allocation, page faults and all, and frees the pooled buffer.)
    receivePool_->release(std::exchange(p->data, receivePool_->acquire(len)));
  } else {
    p->data.resize(len);  // within the capacity: no copy, no fill
  }
  // The largest reply so far: the owners' chunk size once a full chunk came.
  uint32_t seen = replySizeHint_.load(std::memory_order_relaxed);
  while (len > seen && !replySizeHint_.compare_exchange_weak(seen, static_cast<uint32_t>(len),
                                                             std::memory_order_relaxed)) {
  }
  if (!rndv) {
    if (len > 0) std::memcpy(p->data.data(), data, len);
    complete(p, Status::ok());
    return UCS_OK;
  }
  auto* ctx = new RecvCtx{this, p, nullptr};
  ctx->done = [this, p](ucs_status_t st) {
    complete(p, st == UCS_OK
                    ? Status::ok()
                    : Status::unavailable(std::string("receive: ") + ucs_status_string(st)));
  };
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.recv_am = &UcxCluster::onRecvDone;
  rp.user_data = ctx;
  void* req = ucp_am_recv_data_nbx(worker_, data, p->data.data(), len, &rp);
  if (req == nullptr) {
    ctx->done(UCS_OK);
    delete ctx;
  } else if (UCS_PTR_IS_ERR(req)) {
    ctx->done(UCS_PTR_STATUS(req));
    delete ctx;
  }
  return UCS_OK;
}

void UcxCluster::onRecvDone(void* request, ucs_status_t status, size_t length, void* user) {
  auto* ctx = static_cast<RecvCtx*>(user);
  ctx->done(status);
  delete ctx;
  ucp_request_free(request);
}

// ---- the asking side --------------------------------------------------------------

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
  auto p = std::make_shared<Pending>();
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
  Op op;
  op.fetch = p;
  post(std::move(op));
  {
    cache::MutexLock lock(p->mu);
    // The progress thread enforces the deadline; the margin is a backstop.
    if (!p->cv.waitUntil(p->mu, deadline + std::chrono::milliseconds(250),
                         [&]() REQUIRES(p->mu) { return p->done; })) {
      peer.timeouts.fetch_add(1, std::memory_order_relaxed);
      return Status::timedOut("peer " + peer.member.address() + " did not answer in time");
    }
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
  if (integrity_ == wire::Integrity::kMac) {
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

}  // namespace epochfs::transport
