// The handshake of one peer connection and its session, both sides. No UCX.
//
// A member proves the job's secret to the other over fresh nonces from both
// (peer_auth.h): the client sends HELLO, the server CHALLENGE (its own proof),
// the client PROOF, the server WELCOME (tagged with the session key). Then the
// client's requests carry a strictly increasing counter and, with
// --peer-integrity=mac, a tag under the session key.
//
// ClientSession is the asking side of one outbound connection; ServerSession
// the answering side of one inbound connection. Each is used by one thread
// at a time (the progress thread); mac() copies may go to any thread.
#pragma once

#include <cstdint>
#include <string>

#include "cache/status.h"
#include "transport/peer_auth.h"
#include "transport/wire_format.h"

namespace epochfs::transport {

// What both sides of every handshake of this node use.
struct SessionParams {
  std::string secret;
  uint32_t selfId = 0;
  uint32_t memberCount = 0;
  uint64_t capacityBytes = 0;  // announced to the other side
  wire::Integrity integrity = wire::Integrity::kMac;
};

class ClientSession {
 public:
  // HELLO with a fresh nonce (starts over).
  wire::Hello hello(const SessionParams& params);
  // The server's CHALLENGE from member `server`: the PROOF to send, or
  // permissionDenied when the server did not prove the secret (or is not who
  // it should be).
  cache::Result<wire::Proof> challenge(const SessionParams& params, uint32_t server,
                                       const wire::Hello& c);
  // WELCOME: true when it is tagged with the session key (after challenge()).
  bool welcome(const wire::Welcome& w) const;
  bool keyed() const { return mac_.valid(); }
  const PayloadMac& mac() const { return mac_; }
  void reset() { *this = ClientSession(); }

 private:
  Nonce clientNonce_{};
  PayloadMac mac_;
};

class ServerSession {
 public:
  // HELLO: the CHALLENGE to send, or why the connection is dropped.
  cache::Result<wire::Hello> hello(const SessionParams& params, const wire::Hello& h);
  // PROOF: the WELCOME to send (authenticated from now on), or
  // permissionDenied (a wrong secret: count it), or invalidArgument (out of turn).
  cache::Result<wire::Welcome> proof(const SessionParams& params, const wire::Proof& m);
  // A request: ok, or why the connection is dropped (permissionDenied: a bad MAC).
  cache::Status request(const SessionParams& params, const wire::Request& r);

  bool helloSeen() const { return challenged_; }
  bool authed() const { return authed_; }
  uint32_t remote() const { return remote_; }  // valid after hello()
  const PayloadMac& mac() const { return mac_; }

 private:
  bool challenged_ = false;
  bool authed_ = false;
  uint32_t remote_ = 0;
  Nonce clientNonce_{}, serverNonce_{};
  PayloadMac mac_;
  uint64_t lastCounter_ = 0;
};

}  // namespace epochfs::transport
