// The peer handshake and session (peer_session.h).
#include "transport/peer_session.h"

namespace epochfs::transport {

using cache::Status;

namespace {

wire::Hello helloOf(const SessionParams& p, const Nonce& nonce) {
  wire::Hello h;
  h.integrity = static_cast<uint8_t>(p.integrity);
  h.nodeId = p.selfId;
  h.memberCount = p.memberCount;
  h.capacity = p.capacityBytes;
  h.nonce = nonce;
  return h;
}

}  // namespace

wire::Hello ClientSession::hello(const SessionParams& params) {
  reset();
  clientNonce_ = randomNonce();
  return helloOf(params, clientNonce_);
}

cache::Result<wire::Proof> ClientSession::challenge(const SessionParams& params, uint32_t server,
                                                    const wire::Hello& c) {
  const Digest want =
      handshakeProof(params.secret, 'S', clientNonce_, c.nonce, params.selfId, server);
  if (c.magic != wire::kMagic || c.nodeId != server ||
      !equalDigests(c.proof.data(), want.data(), want.size())) {
    return Status::permissionDenied("failed authentication");
  }
  wire::Proof pr;
  pr.proof = handshakeProof(params.secret, 'C', clientNonce_, c.nonce, params.selfId, server);
  mac_ = PayloadMac(sessionKey(params.secret, clientNonce_, c.nonce));
  return pr;
}

bool ClientSession::welcome(const wire::Welcome& w) const {
  return mac_.valid() && mac_.verify(w.tag, wire::kWelcomeDir, 0, "welcome", 7, nullptr, 0);
}

cache::Result<wire::Hello> ServerSession::hello(const SessionParams& params, const wire::Hello& h) {
  if (challenged_) return Status::invalidArgument("a second hello");
  if (h.magic != wire::kMagic || h.version != wire::kVersion) {
    return Status::invalidArgument("not an epochfs peer (bad magic/version)");
  }
  if (h.memberCount != params.memberCount || h.nodeId >= params.memberCount ||
      h.nodeId == params.selfId) {
    return Status::invalidArgument("node " + std::to_string(h.nodeId) + " of " +
                                   std::to_string(h.memberCount) + " is not a member of this job");
  }
  if (h.integrity != static_cast<uint8_t>(params.integrity)) {
    return Status::invalidArgument("--peer-integrity differs between the nodes");
  }
  challenged_ = true;
  remote_ = h.nodeId;
  clientNonce_ = h.nonce;
  serverNonce_ = randomNonce();
  wire::Hello c = helloOf(params, serverNonce_);
  c.proof = handshakeProof(params.secret, 'S', clientNonce_, serverNonce_, remote_, params.selfId);
  return c;
}

cache::Result<wire::Welcome> ServerSession::proof(const SessionParams& params,
                                                  const wire::Proof& m) {
  if (!challenged_ || authed_) return Status::invalidArgument("proof out of turn");
  const Digest want =
      handshakeProof(params.secret, 'C', clientNonce_, serverNonce_, remote_, params.selfId);
  if (!equalDigests(m.proof.data(), want.data(), want.size())) {
    return Status::permissionDenied("bad proof (wrong secret?)");
  }
  authed_ = true;
  mac_ = PayloadMac(sessionKey(params.secret, clientNonce_, serverNonce_));
  wire::Welcome w;
  w.tag = mac_.sign(wire::kWelcomeDir, 0, "welcome", 7, nullptr, 0);
  return w;
}

Status ServerSession::request(const SessionParams& params, const wire::Request& r) {
  if (!authed_) return Status::invalidArgument("request before authentication");
  if (r.counter <= lastCounter_) return Status::invalidArgument("replayed request");
  if (params.integrity == wire::Integrity::kMac) {
    wire::Request plain = r;
    plain.tag = Tag{};
    if (!mac_.verify(r.tag, wire::kToServer, r.counter, &plain, sizeof plain, nullptr, 0)) {
      return Status::permissionDenied("request with a bad MAC (forged?)");
    }
  }
  lastCounter_ = r.counter;
  return Status::ok();
}

}  // namespace epochfs::transport
