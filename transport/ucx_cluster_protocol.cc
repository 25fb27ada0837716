// UcxCluster: the active messages (wire_format.h) on the progress thread —
// the handshake (its logic in peer_session.cc), requests and replies. The
// callers' side: ucx_cluster_fetch.cc; serving: chunk_server.cc.
#include <spdlog/spdlog.h>

#include <cstring>

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

void UcxCluster::sendRequest(const std::shared_ptr<PendingFetch>& p) {
  Peer& peer = *peers_[p->peer];
  if (health_->state(p->peer) != State::kUp || peer.ep == nullptr) {
    return requests_.complete(p,
                              Status::unavailable("peer " + peer.member.address() + " is not up"));
  }
  if (requests_.full(p->peer)) {
    return requests_.complete(
        p, Status::unavailable("too many requests in flight to " + peer.member.address()));
  }
  const auto now = Clock::now();
  if (p->deadline <= now) {
    return requests_.complete(p, Status::timedOut("deadline passed before sending"));
  }
  wire::Request r;
  r.fileId = p->id.fileId;
  r.size = p->id.size;
  r.mtimeNs = p->id.mtimeNs;
  r.ctimeNs = p->id.ctimeNs;
  r.inode = p->id.inode;
  r.chunkIndex = p->key.chunkIndex;
  r.deadlineMs = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(p->deadline - now).count());
  r.counter = macCounter_.fetch_add(1);
  r.reqId = requests_.add(p);
  if (session_.integrity == wire::Integrity::kMac) {
    r.tag = peer.session.mac().sign(wire::kToServer, r.counter, &r, sizeof r, nullptr, 0);
  }
  p->mac = peer.session.mac();
  if (!sendAm(peer.ep, wire::kRequest, &r, sizeof r, nullptr)) {
    requests_.complete(p, Status::unavailable("cannot send to " + peer.member.address()));
  }
}

void UcxCluster::sendReply(ClusterOp& op) {
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
      if (Inbound* in = inboundByEp(ep); in != nullptr && in->session.authed()) {
        sendAm(ep, wire::kPong, &std::get<wire::Ping>(body), sizeof(wire::Ping), nullptr);
      }
    }
    if (id == wire::kPong) {
      if (Peer* p = peerByEp(ep)) health_->answered(p->member.id, Clock::now());
    }
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ucp_am_data_release(worker_, data);
  return UCS_OK;
}

void UcxCluster::onHello(ucp_ep_h ep, const wire::Hello& h) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  auto challenge = in->session.hello(session_, h);
  if (!challenge.isOk()) return dropInbound(ep, challenge.status().message());
  sendAm(ep, wire::kChallenge, &*challenge, sizeof *challenge, nullptr);
}

void UcxCluster::onChallenge(ucp_ep_h ep, const wire::Hello& h) {
  Peer* p = peerByEp(ep);
  if (p == nullptr || health_->state(p->member.id) != State::kConnecting) return;
  auto proof = p->session.challenge(session_, p->member.id, h);
  if (!proof.isOk()) {
    p->authFailures.fetch_add(1);
    spdlog::error("cluster: peer {} ({}) failed authentication (another job's secret?); refused",
                  p->member.id, p->member.address());
    return peerFailed(*p, State::kRefused, "failed authentication");
  }
  health_->setCapacity(p->member.id, h.capacity);
  if (!sendAm(ep, wire::kProof, &*proof, sizeof *proof, nullptr)) {
    peerFailed(*p, State::kDown, "send failed");
  }
}

void UcxCluster::onProof(ucp_ep_h ep, const wire::Proof& m) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  auto welcome = in->session.proof(session_, m);
  if (welcome.status().code() == Status::Code::kPermissionDenied) {
    peers_[in->session.remote()]->authFailures.fetch_add(1);
    spdlog::error("cluster: refused a connection claiming node {}: bad proof (wrong secret?)",
                  in->session.remote());
    return dropInbound(ep, "");
  }
  if (!welcome.isOk()) return dropInbound(ep, welcome.status().message());
  sendAm(ep, wire::kWelcome, &*welcome, sizeof *welcome, nullptr);
}

void UcxCluster::onWelcome(ucp_ep_h ep, const wire::Welcome& m) {
  Peer* p = peerByEp(ep);
  if (p == nullptr || health_->state(p->member.id) != State::kConnecting || !p->session.keyed()) {
    return;
  }
  if (!p->session.welcome(m)) {
    p->authFailures.fetch_add(1);
    spdlog::error("cluster: peer {} ({}) sent a forged welcome; refused", p->member.id,
                  p->member.address());
    return peerFailed(*p, State::kRefused, "forged welcome");
  }
  p->connects.fetch_add(1);
  health_->connected(p->member.id, Clock::now());
}

void UcxCluster::onRequest(ucp_ep_h ep, const wire::Request& r) {
  Inbound* in = inboundByEp(ep);
  if (in == nullptr) return;
  if (Status s = in->session.request(session_, r); !s.isOk()) {
    if (s.code() == Status::Code::kPermissionDenied) {
      peers_[in->session.remote()]->authFailures.fetch_add(1);
    }
    return dropInbound(ep, s.message());
  }
  const uint32_t remote = in->session.remote();
  if (server_->submit(ChunkServer::Task{in->connId, remote, r, Clock::now(), in->session.mac()})) {
    return;
  }
  ClusterOp op;
  op.connId = in->connId;
  op.reply.reqId = r.reqId;
  op.reply.code = static_cast<uint32_t>(Status::Code::kUnavailable);
  op.reply.counter = macCounter_.fetch_add(1);
  if (session_.integrity == wire::Integrity::kMac) {
    op.reply.tag = in->session.mac().sign(wire::kToClient, op.reply.counter, &op.reply,
                                          sizeof op.reply, nullptr, 0);
  }
  peers_[remote]->serving.serveErrors.fetch_add(1);
  sendReply(op);
}

ucs_status_t UcxCluster::onReply(ucp_ep_h ep, const wire::Reply& r, void* data, size_t len,
                                 const ucp_am_recv_param_t* param) {
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  std::shared_ptr<PendingFetch> p = requests_.find(r.reqId);
  if (p == nullptr || peers_[p->peer]->ep != ep) {
    if (rndv) ucp_am_data_release(worker_, data);  // late (timed out) or unknown
    return UCS_OK;
  }
  health_->heard(p->peer, Clock::now());
  p->reply = r;
  if (r.code != 0 || r.length != len || len > (64u << 20)) {
    if (rndv) ucp_am_data_release(worker_, data);
    requests_.complete(p, r.code != 0 ? refusal(r.code, peers_[p->peer]->member.address())
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
    requests_.complete(p, Status::ok());
    return UCS_OK;
  }
  auto* ctx = new RecvCtx{this, p, nullptr};
  ctx->done = [this, p](ucs_status_t st) {
    requests_.complete(
        p, st == UCS_OK ? Status::ok()
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

}  // namespace epochfs::transport
