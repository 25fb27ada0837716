#include "transport/s3/etag.h"

#include <cstring>

#include "cache/checksum.h"

namespace epochfs::transport::s3 {

namespace {

int lowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case too: rebuilding it in lower case would not match If-Match
}

// "N" of a multipart ETag: decimal, no sign, no leading zero, 1..UINT32_MAX.
bool parsePartCount(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10 || s.front() == '0') return false;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(n);
  return true;
}

}  // namespace

ETag ETag::parse(std::string_view value) {
  ETag tag;
  std::string_view inner = value;
  bool md5 = inner.size() >= 34 && inner.front() == '"' && inner.back() == '"';
  if (md5) {
    inner = inner.substr(1, inner.size() - 2);
    for (size_t i = 0; md5 && i < 16; ++i) {
      const int hi = lowerHexValue(inner[2 * i]);
      const int lo = lowerHexValue(inner[2 * i + 1]);
      md5 = hi >= 0 && lo >= 0;
      if (md5) tag.bytes_[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    if (md5 && inner.size() > 32) {
      md5 = inner[32] == '-' && parsePartCount(inner.substr(33), &tag.parts_);
    }
  }
  if (md5) {
    tag.kind_ = Kind::kMd5;
    return tag;
  }
  tag = ETag();
  tag.kind_ = Kind::kHashed;
  const uint64_t h = cache::checksum(value.data(), value.size());
  for (int i = 0; i < 8; ++i) tag.bytes_[i] = static_cast<uint8_t>(h >> (8 * i));
  return tag;
}

uint64_t ETag::identityHash() const {
  if (kind_ == Kind::kNone) return 0;
  uint8_t buf[sizeof bytes_ + sizeof parts_ + 1];
  std::memcpy(buf, bytes_.data(), bytes_.size());
  std::memcpy(buf + bytes_.size(), &parts_, sizeof parts_);
  buf[sizeof buf - 1] = static_cast<uint8_t>(kind_);
  return cache::checksum(buf, sizeof buf);
}

std::optional<std::string> ETag::headerValue() const {
  if (kind_ != Kind::kMd5) return std::nullopt;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (uint8_t b : bytes_) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  if (parts_ != 0) {
    out.push_back('-');
    out += std::to_string(parts_);
  }
  out.push_back('"');
  return out;
}

}  // namespace epochfs::transport::s3
