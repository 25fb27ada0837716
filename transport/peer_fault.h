// PeerFault: a TEST-ONLY fault hook that makes this node corrupt the chunks it
// serves to peers, so the receivers' checks (payload MAC, XXH3 checksum), the
// fallback to another replica or the source, and the suspect state can be
// tested end to end (docs/RELIABILITY.md cases 4 and 14). Never set in
// production: the daemon reads it only from the environment variable
//
//   EPOCHFS_FAULT_PEER_FLIP=MODE[:EVERY]      e.g. "memory", "forge:3"
//
// and logs an error at start while it is active. MODE says what a flip looks
// like to the receiver:
//   wire    one bit flipped after signing (corruption in flight): the MAC
//           fails (mac mode), the checksum fails (checksum mode);
//   memory  one bit flipped before signing (corruption in the owner's RAM):
//           the MAC is valid, the XXH3 checksum fails;
//   forge   one bit flipped, the checksum recomputed, the MAC left stale (a
//           forged payload without the session key): only the MAC catches it.
// EVERY: corrupt every Nth chunk served (default 1, every chunk).
#pragma once

#include <cstdint>
#include <string>

#include "cache/status.h"

namespace epochfs::transport {

struct PeerFault {
  enum class Mode : uint8_t { kNone, kWire, kMemory, kForge };
  Mode mode = Mode::kNone;
  uint32_t every = 1;

  bool active() const { return mode != Mode::kNone; }
  std::string describe() const;
};

inline constexpr const char* kPeerFaultEnv = "EPOCHFS_FAULT_PEER_FLIP";

// Parses "MODE[:EVERY]"; "" gives an inactive hook.
cache::Result<PeerFault> parsePeerFault(const std::string& spec);

// The hook named by $EPOCHFS_FAULT_PEER_FLIP (inactive when unset).
cache::Result<PeerFault> peerFaultFromEnv();

}  // namespace epochfs::transport
