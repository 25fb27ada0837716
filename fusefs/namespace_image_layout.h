// The namespace image's layout constants and its little-endian writer,
// shared by the encoder (namespace_image_encode.cc) and the decoder
// (namespace_image.cc). Internal to NamespaceImage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace epochfs::fusefs::image_layout {

// Bytes of a node record without its name and target.
constexpr size_t kNodeFixedBytes = 4 + 4 + 4 + 4 + 8 + 4 * 4 + 3 * 8 + 3 * 8 + 1;
constexpr size_t kVersionBytes = 8 + 1 + 4 + 16;
constexpr size_t kChecksumAt = 32;
constexpr uint8_t kMaxVersionKind = 2;  // transport/s3/etag.h ETag::Kind

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }

 private:
  std::string& out_;
};

}  // namespace epochfs::fusefs::image_layout
