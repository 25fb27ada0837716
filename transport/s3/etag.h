// ETag: an object's version as S3 lists it, kept compact (issue #33: a
// namespace of millions of objects counts bytes per file). The two forms S3
// produces are kept exactly: "<32 lower-case hex>" (MD5 of a single-part
// upload) and "<32 hex>-<N>" (multipart, N parts) become 16 bytes plus the
// part count, and the header value for If-Match is rebuilt byte for byte. Any
// other form (a weak or upper-case ETag, an opaque one from another server) is
// kept as a 64-bit hash of the string with the kHashed flag: it still tells a
// changed object apart, but the string itself cannot be rebuilt. A value type;
// thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace epochfs::transport::s3 {

class ETag {
 public:
  enum class Kind : uint8_t { kNone, kMd5, kHashed };

  ETag() = default;  // kNone: the listing gave no ETag
  // From the ETag as the server sent it, quotes included.
  static ETag parse(std::string_view value);

  Kind kind() const { return kind_; }
  // kMd5: the MD5 bytes; kHashed: the hash in the first 8 bytes (little
  // endian), the rest zero; kNone: zeros.
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  // kMd5: 0 for a single-part object, N for "-N".
  uint32_t parts() const { return parts_; }
  // One 64-bit value for a file's identity: differs when the ETag does.
  uint64_t identityHash() const;
  // The exact header value to send in If-Match; nullopt for kNone and
  // kHashed (the string is not kept).
  std::optional<std::string> headerValue() const;

  bool operator==(const ETag&) const = default;

 private:
  std::array<uint8_t, 16> bytes_{};
  uint32_t parts_ = 0;
  Kind kind_ = Kind::kNone;
};

}  // namespace epochfs::transport::s3
