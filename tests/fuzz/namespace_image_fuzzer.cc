// Fuzzes NamespaceImage::decode (fusefs/namespace_image.h), the bytes a
// restarted worker gets from its supervisor (and, later, from other nodes
// or disk). Each input is tried twice: as given, and resealed (the checksum
// recomputed) so the structural checks behind the checksum are reached.
// Pass: no crash, no sanitizer report, bounded memory; an image that decodes
// encodes to bytes that decode and encode back to themselves (checked; a
// violation aborts). Not the input's bytes: the format carries fields the
// namespace does not keep (atime, link counts, a directory's size, the file
// ids it recomputes), which the first encoding normalizes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fusefs/namespace_image.h"

namespace fusefs = epochfs::fusefs;

namespace {

void tryDecode(const std::string& bytes) {
  auto d = fusefs::NamespaceImage::decode(bytes);
  if (!d.isOk()) return;
  // Lookups over the decoded tree must stay in range.
  for (fusefs::DatasetNamespace::Ino ino = 2; ino <= d->ns.nodeCount(); ++ino) {
    if (d->ns.lookup(d->ns.parentOf(ino), d->ns.name(ino)) != ino) std::abort();
  }
  const std::string again =
      fusefs::NamespaceImage::encode(d->ns, d->versions ? &*d->versions : nullptr);
  auto d2 = fusefs::NamespaceImage::decode(again);
  if (!d2.isOk()) std::abort();
  if (fusefs::NamespaceImage::encode(d2->ns, d2->versions ? &*d2->versions : nullptr) != again) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  tryDecode(bytes);
  fusefs::NamespaceImage::reseal(bytes);
  tryDecode(bytes);
  return 0;
}
