// ChunkKey: the cache key of one chunk of one file of one dataset.
// key = XXH3-64 of (datasetId, fileId, chunkIndex). The file's version
// (FileIdentity) travels beside the key in every stored chunk, so a lookup
// with a different version misses instead of returning old bytes.
#pragma once

#include <cstdint>
#include <functional>

namespace epochfs::cache {

struct ChunkKey {
  uint64_t hash = 0;
  uint64_t fileId = 0;
  uint32_t chunkIndex = 0;

  static ChunkKey make(uint64_t datasetId, uint64_t fileId, uint32_t chunkIndex);
  bool operator==(const ChunkKey& o) const { return hash == o.hash; }
};

struct ChunkKeyHash {
  size_t operator()(const ChunkKey& k) const { return static_cast<size_t>(k.hash); }
};

}  // namespace epochfs::cache
