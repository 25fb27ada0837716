#include "fusefs/daemon/namespace_handover.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "fusefs/namespace_image.h"
#include "transport/s3/etag.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;
using transport::s3::ETag;

namespace {

ImageVersion toImage(uint64_t fileId, const ETag& tag) {
  ImageVersion v;
  v.fileId = fileId;
  v.kind = static_cast<uint8_t>(tag.kind());
  v.parts = tag.parts();
  v.bytes = tag.bytes();
  return v;
}

// The ETag an ImageVersion was made from. Only kMd5 and kNone can be rebuilt
// (a kHashed ETag keeps a hash, not the string If-Match needs).
Result<ETag> fromImage(const ImageVersion& v) {
  if (v.kind == static_cast<uint8_t>(ETag::Kind::kNone)) return ETag();
  if (v.kind != static_cast<uint8_t>(ETag::Kind::kMd5)) {
    return Status::invalidArgument("an ETag of a form that cannot be rebuilt");
  }
  std::string hex;
  for (uint8_t b : v.bytes) hex += fmt::format("{:02x}", b);
  const std::string header =
      v.parts != 0 ? fmt::format("\"{}-{}\"", hex, v.parts) : fmt::format("\"{}\"", hex);
  ETag tag = ETag::parse(header);
  if (tag.kind() != ETag::Kind::kMd5 || tag.bytes() != v.bytes || tag.parts() != v.parts) {
    return Status::corruption("an ETag does not rebuild");
  }
  return tag;
}

}  // namespace

Result<int> NamespaceHandover::publish(const DatasetNamespace& ns, S3Dataset* s3) {
  std::optional<std::vector<ImageVersion>> versions;
  if (s3 != nullptr) {
    versions.emplace();
    if (auto v = s3->versions()) {
      versions->reserve(v->size());
      for (const auto& [fileId, tag] : *v) versions->push_back(toImage(fileId, tag));
    }
  }
  // Written straight into the memfd: the image is never a string of its own.
  const int fd = memfd_create("epochfs-namespace", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::fromErrno(errno, "memfd_create");
  Status s = NamespaceImage::encodeTo(fd, ns, versions ? &*versions : nullptr);
  if (s.isOk() &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    s = Status::fromErrno(errno, "seal namespace image");
  }
  if (!s.isOk()) {
    close(fd);
    return s;
  }
  return fd;
}

Result<DatasetNamespace> NamespaceHandover::adopt(int fd, const std::string& expectedFingerprint,
                                                  S3Dataset* s3) {
  // Read in pieces, never whole (a 10-million-file image is over a gigabyte).
  Status sealed = NamespaceImage::checkSealed(fd);
  auto decoded = sealed.isOk() ? NamespaceImage::decodeFile(fd) : Result<DecodedNamespace>(sealed);
  close(fd);
  if (!decoded.isOk()) return decoded.status();
  const std::string fp = fmt::format("{:016x}", decoded->ns.fingerprint());
  if (expectedFingerprint.empty() || fp != expectedFingerprint) {
    return Status::stale(
        fmt::format("its fingerprint {} is not the mount's ({})", fp, expectedFingerprint));
  }
  if (s3 != nullptr) {
    if (!decoded->versions) return Status::invalidArgument("it has no ETags");
    transport::s3::S3Source::Versions versions;
    versions.reserve(decoded->versions->size());
    for (const ImageVersion& v : *decoded->versions) {
      auto tag = fromImage(v);
      if (!tag.isOk()) return tag.status();
      versions.emplace_back(v.fileId, *tag);
    }
    s3->adoptVersions(std::move(versions));
  }
  return std::move(decoded->ns);
}

}  // namespace epochfs::fusefs
