#include <xxhash.h>

#include <cstring>

#include "cache/checksum.h"
#include "cache/chunk_key.h"
#include "cache/file_identity.h"

namespace epochfs::cache {

#if defined(EPOCHFS_XXH3_AVX2)
namespace simd {
unsigned long long xxh3Avx2(const void* data, size_t len);  // checksum_avx2.cc
}

namespace {
using Xxh3Fn = unsigned long long (*)(const void*, size_t);
unsigned long long xxh3Library(const void* data, size_t len) { return XXH3_64bits(data, len); }
Xxh3Fn pickXxh3() {
  __builtin_cpu_init();  // may run before libgcc's own constructor
  return __builtin_cpu_supports("avx2") ? simd::xxh3Avx2 : xxh3Library;
}
}  // namespace

uint64_t checksum(const void* data, size_t len) {
  // Chosen once (a function-local static, safe from any static initialiser):
  // the CPU does not change under a running daemon.
  static const Xxh3Fn xxh3 = pickXxh3();
  return xxh3(data, len);
}
#else
uint64_t checksum(const void* data, size_t len) { return XXH3_64bits(data, len); }
#endif

uint64_t fileIdForPath(std::string_view relPath) {
  return XXH3_64bits(relPath.data(), relPath.size());
}

uint64_t datasetIdForPath(std::string_view absSourcePath) {
  return XXH3_64bits_withSeed(absSourcePath.data(), absSourcePath.size(), 0x65706f6368ULL);
}

ChunkKey ChunkKey::make(uint64_t datasetId, uint64_t fileId, uint32_t chunkIndex) {
  unsigned char buf[20];
  std::memcpy(buf, &datasetId, 8);
  std::memcpy(buf + 8, &fileId, 8);
  std::memcpy(buf + 16, &chunkIndex, 4);
  return ChunkKey{XXH3_64bits(buf, sizeof buf), fileId, chunkIndex};
}

}  // namespace epochfs::cache
