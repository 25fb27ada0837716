#include "transport/peer_fault.h"

#include <cstdlib>

namespace epochfs::transport {

using cache::Result;
using cache::Status;

std::string PeerFault::describe() const {
  const char* m = mode == Mode::kWire     ? "wire"
                  : mode == Mode::kMemory ? "memory"
                  : mode == Mode::kForge  ? "forge"
                                          : "none";
  return std::string(m) + " every " + std::to_string(every);
}

Result<PeerFault> parsePeerFault(const std::string& spec) {
  PeerFault f;
  if (spec.empty()) return f;
  const auto colon = spec.find(':');
  const std::string mode = spec.substr(0, colon);
  if (mode == "wire") {
    f.mode = PeerFault::Mode::kWire;
  } else if (mode == "memory") {
    f.mode = PeerFault::Mode::kMemory;
  } else if (mode == "forge") {
    f.mode = PeerFault::Mode::kForge;
  } else {
    return Status::invalidArgument(std::string(kPeerFaultEnv) + ": unknown mode '" + mode +
                                   "' (wire, memory, forge)");
  }
  if (colon != std::string::npos) {
    const std::string n = spec.substr(colon + 1);
    char* end = nullptr;
    const unsigned long v = std::strtoul(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v < 1 || v > 1000000) {
      return Status::invalidArgument(std::string(kPeerFaultEnv) +
                                     ": EVERY must be 1..1000000, not '" + n + "'");
    }
    f.every = static_cast<uint32_t>(v);
  }
  return f;
}

Result<PeerFault> peerFaultFromEnv() {
  const char* v = std::getenv(kPeerFaultEnv);
  return parsePeerFault(v == nullptr ? "" : v);
}

}  // namespace epochfs::transport
