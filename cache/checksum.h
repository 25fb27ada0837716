// Checksums of cached bytes: XXH3-64 (integrity, not authenticity).
#pragma once

#include <cstddef>
#include <cstdint>

namespace epochfs::cache {

uint64_t checksum(const void* data, size_t len);

}  // namespace epochfs::cache
