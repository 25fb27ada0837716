#include <xxhash.h>

#include <cstring>

#include "cache/checksum.h"
#include "cache/chunk_key.h"
#include "cache/file_identity.h"

namespace epochfs::cache {

uint64_t checksum(const void* data, size_t len) { return XXH3_64bits(data, len); }

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
