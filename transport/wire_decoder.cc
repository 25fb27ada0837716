#include "transport/wire_decoder.h"

#include <cstring>
#include <string>

namespace epochfs::transport::wire {

using cache::Result;
using cache::Status;

namespace {

// Copies the header into a T when it is exactly sizeof(T) bytes (the structs
// are trivially copyable; memcpy also avoids unaligned reads).
template <typename T>
Result<T> readExact(const char* what, const void* header, size_t headerLen) {
  if (header == nullptr && headerLen != 0)
    return Status::invalidArgument(std::string(what) + ": null header");
  if (headerLen != sizeof(T)) {
    return Status::invalidArgument(std::string(what) + ": header is " + std::to_string(headerLen) +
                                   " bytes, expected " + std::to_string(sizeof(T)));
  }
  T out;
  std::memcpy(&out, header, sizeof(T));
  return out;
}

Status checkHello(const char* what, const Hello& h) {
  if (h.magic != kMagic)
    return Status::invalidArgument(std::string(what) + ": bad magic (not an epochfs peer)");
  if (h.version != kVersion) {
    return Status::invalidArgument(std::string(what) + ": protocol version " +
                                   std::to_string(h.version) + ", expected " +
                                   std::to_string(kVersion));
  }
  if (h.integrity != static_cast<uint8_t>(Integrity::kMac) &&
      h.integrity != static_cast<uint8_t>(Integrity::kChecksum)) {
    return Status::invalidArgument(std::string(what) + ": unknown integrity mode " +
                                   std::to_string(h.integrity));
  }
  if (h.memberCount == 0 || h.memberCount > kMaxMembers || h.nodeId >= h.memberCount) {
    return Status::invalidArgument(std::string(what) + ": node " + std::to_string(h.nodeId) +
                                   " of " + std::to_string(h.memberCount) + " members");
  }
  return Status::ok();
}

Status checkReply(const Reply& r, size_t dataLen) {
  if (r.code > static_cast<uint32_t>(Status::Code::kTooLarge)) {
    return Status::invalidArgument("REPLY: unknown status code " + std::to_string(r.code));
  }
  if (r.length > kMaxReplyBytes) {
    return Status::invalidArgument("REPLY: length " + std::to_string(r.length) +
                                   " over the 64 MiB cap");
  }
  // An error reply carries no chunk; a success carries exactly `length` bytes.
  const uint64_t want = r.code == 0 ? r.length : 0;
  if (r.length != want || dataLen != want) {
    return Status::invalidArgument("REPLY: header says " + std::to_string(r.length) +
                                   " bytes (code " + std::to_string(r.code) + "), " +
                                   std::to_string(dataLen) + " arrived");
  }
  return Status::ok();
}

template <typename T>
Result<AmMessage> wrap(uint16_t id, Result<T> r, Status check = Status::ok()) {
  if (!r.isOk()) return r.status();
  if (!check.isOk()) return check;
  return AmMessage{id, std::move(r).value()};
}

}  // namespace

bool isClientToServer(uint16_t id) {
  return id == kHello || id == kProof || id == kRequest || id == kPing;
}

Result<AmMessage> decodeAm(uint16_t id, const void* header, size_t headerLen, size_t dataLen) {
  if (id != kReply && dataLen != 0) {
    return Status::invalidArgument("message " + std::to_string(id) + " carries " +
                                   std::to_string(dataLen) + " unexpected data bytes");
  }
  switch (id) {
    case kHello:
    case kChallenge: {
      const char* what = id == kHello ? "HELLO" : "CHALLENGE";
      auto h = readExact<Hello>(what, header, headerLen);
      if (!h.isOk()) return h.status();
      Status s = checkHello(what, *h);
      return wrap(id, std::move(h), std::move(s));
    }
    case kProof:
      return wrap(id, readExact<Proof>("PROOF", header, headerLen));
    case kWelcome:
      return wrap(id, readExact<Welcome>("WELCOME", header, headerLen));
    case kRequest:
      return wrap(id, readExact<Request>("REQUEST", header, headerLen));
    case kReply: {
      auto r = readExact<Reply>("REPLY", header, headerLen);
      if (!r.isOk()) return r.status();
      Status s = checkReply(*r, dataLen);
      return wrap(id, std::move(r), std::move(s));
    }
    case kPing:
    case kPong:
      return wrap(id, readExact<Ping>(id == kPing ? "PING" : "PONG", header, headerLen));
    default:
      return Status::invalidArgument("unknown message id " + std::to_string(id));
  }
}

}  // namespace epochfs::transport::wire
