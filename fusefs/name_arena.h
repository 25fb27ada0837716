// NameArena: the names (and symlink targets) of a DatasetNamespace, packed
// end to end in 1 MiB chunks that never move: a name is an offset and a
// length, not a string of its own (a std::string costs 32 bytes before its
// characters). Up to 4 GiB of names.
//
// Thread-safety: one writer at a time (append(), the caller serializes);
// view() from any thread, for an offset published to it after the append
// (e.g. in a node written before a count stored with release).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "fusefs/chunked_array.h"

namespace epochfs::fusefs {

class NameArena {
 public:
  static constexpr size_t kMaxEntry = size_t{1} << 20;  // one chunk

  // Stores `a` then `b` contiguously; their offset, or nullopt when the
  // arena is full or the pair is longer than kMaxEntry.
  std::optional<uint32_t> append(std::string_view a, std::string_view b = {}) {
    const size_t n = a.size() + b.size();
    if (n > kMaxEntry) return std::nullopt;
    size_t at = used_;
    if ((at & (kMaxEntry - 1)) + n > kMaxEntry) at = (at | (kMaxEntry - 1)) + 1;  // next chunk
    if (at + n >= Bytes::kCapacity) return std::nullopt;
    if (n > 0) {
      char* p = &bytes_.at(at);
      // An empty view may hold a null pointer, which memcpy must not get.
      if (!a.empty()) std::memcpy(p, a.data(), a.size());
      if (!b.empty()) std::memcpy(p + a.size(), b.data(), b.size());
    }
    used_ = at + n;
    return static_cast<uint32_t>(at);
  }

  std::string_view view(uint32_t offset, size_t length) const {
    if (length == 0) return {};
    return std::string_view(&bytes_[offset], length);
  }

  // Bytes taken, chunk padding included.
  uint64_t used() const { return used_; }

 private:
  // 4096 chunks of 1 MiB: 4 GiB, the reach of a 32-bit offset.
  using Bytes = ChunkedArray<char, 20, 4096, /*kValueInit=*/false>;
  Bytes bytes_;
  uint64_t used_ = 0;
};

}  // namespace epochfs::fusefs
