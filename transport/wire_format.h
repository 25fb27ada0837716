// Wire format of the peer protocol (UCX active messages). Fixed-size,
// native-endian structs (every supported host is little-endian), sent as the
// AM header; a reply's chunk bytes are the AM data (UCX switches to
// rendezvous above its threshold, zero-copy from the RAM tier's buffer).
//
//   client (the node that asks)            server (the owner)
//   HELLO {node, nonce_c, capacity}   -->
//                                     <--  CHALLENGE {node, nonce_s, proof_s}
//   PROOF {proof_c}                   -->  (verifies proof_c, derives session)
//                                     <--  WELCOME {MAC under session}
//   REQUEST {req, file, chunk, identity, deadline, MAC} -->
//                                     <--  REPLY {req, status, xxh3, length, MAC(hdr+data)} + data
//   PING / PONG                            (probing a suspect peer)
//
// proof_s = HMAC-SHA256(secret, "S" | nonce_c | nonce_s | nodes), proof_c with
// "C": fresh nonces from both sides, so a replayed handshake fails.
// Internal to transport/.
#pragma once

#include <bit>
#include <cstdint>

#include "transport/peer_auth.h"

namespace epochfs::transport::wire {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

enum AmId : uint16_t {
  kHello = 11,
  kChallenge = 12,
  kProof = 13,
  kWelcome = 14,
  kRequest = 15,
  kReply = 16,
  kPing = 17,
  kPong = 18,
};
inline constexpr uint16_t kFirstAm = kHello;
inline constexpr uint16_t kLastAm = kPong;

inline constexpr uint32_t kMagic = 0x53465045;  // "EPFS"
// 2: payload tags are ChaCha20-Poly1305 (1: AES-GMAC); a node of the other
// version is refused at HELLO, not mistaken for a forger.
inline constexpr uint16_t kVersion = 2;
// MAC nonce directions: never the same (key, iv) twice.
inline constexpr uint32_t kToServer = 1;
inline constexpr uint32_t kToClient = 2;
inline constexpr uint32_t kWelcomeDir = 3;

enum class Integrity : uint8_t { kMac = 1, kChecksum = 2 };

struct Hello {  // HELLO and CHALLENGE
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint8_t integrity = 0;
  uint8_t pad = 0;
  uint32_t nodeId = 0;
  uint32_t memberCount = 0;
  uint64_t capacity = 0;
  Nonce nonce{};
  Digest proof{};  // CHALLENGE only
};

struct Proof {
  Digest proof{};
};

struct Welcome {
  Tag tag{};
};

struct Request {
  uint64_t reqId = 0;
  uint64_t fileId = 0;
  uint64_t size = 0;
  int64_t mtimeNs = 0;
  int64_t ctimeNs = 0;
  uint64_t inode = 0;
  uint32_t chunkIndex = 0;
  uint32_t deadlineMs = 0;  // remaining when sent
  uint64_t counter = 0;     // MAC nonce; strictly increasing per connection
  Tag tag{};                // over this struct with tag zeroed
};

struct Reply {
  uint64_t reqId = 0;
  uint32_t code = 0;  // cache::Status::Code
  uint32_t pad = 0;
  uint64_t checksum = 0;  // XXH3-64 of the data
  uint64_t length = 0;
  uint64_t counter = 0;
  Tag tag{};  // over this struct with tag zeroed, then the data
};

struct Ping {
  uint64_t seq = 0;
};

}  // namespace epochfs::transport::wire
