// Fuzzes wire::decodeAm(), the receive side of the peer protocol: input =
// AM id (2 bytes) | data length (4 bytes) | header bytes. Pass: no crash, no
// sanitizer report, bounded memory, and every decoded message satisfies the
// decoder's promises (checked below; a violation aborts, which libFuzzer
// reports as a crash).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire_decoder.h"

namespace wire = epochfs::transport::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  uint16_t id;
  uint32_t dataLen;
  std::memcpy(&id, data, 2);
  std::memcpy(&dataLen, data + 2, 4);
  // The header in its own buffer, so ASan sees any read past its end.
  std::vector<uint8_t> header(data + 6, data + size);
  auto m = wire::decodeAm(id, header.data(), header.size(), dataLen);
  if (!m.isOk()) {
    require(!m.status().message().empty());
    return 0;
  }
  require(m->id == id && id >= wire::kFirstAm && id <= wire::kLastAm);
  require(id == wire::kReply || dataLen == 0);
  if (const auto* h = std::get_if<wire::Hello>(&m->body)) {
    require(header.size() == sizeof(wire::Hello) && (id == wire::kHello || id == wire::kChallenge));
    require(h->magic == wire::kMagic && h->version == wire::kVersion);
    require(h->nodeId < h->memberCount && h->memberCount <= wire::kMaxMembers);
  } else if (const auto* r = std::get_if<wire::Reply>(&m->body)) {
    require(header.size() == sizeof(wire::Reply) && id == wire::kReply);
    require(r->length <= wire::kMaxReplyBytes && r->length == dataLen);
    require(r->code == 0 || r->length == 0);
  } else if (std::get_if<wire::Request>(&m->body)) {
    require(header.size() == sizeof(wire::Request) && id == wire::kRequest);
  } else if (std::get_if<wire::Proof>(&m->body)) {
    require(header.size() == sizeof(wire::Proof) && id == wire::kProof);
  } else if (std::get_if<wire::Welcome>(&m->body)) {
    require(header.size() == sizeof(wire::Welcome) && id == wire::kWelcome);
  } else {
    require(header.size() == sizeof(wire::Ping) && (id == wire::kPing || id == wire::kPong));
  }
  return 0;
}
