// Chunk: an immutable, checksummed piece of one version of one file.
// Shared by reference (ChunkRef) between tiers and in-flight FUSE replies,
// so serving a hit copies nothing and allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/chunk_buffer.h"
#include "cache/chunk_key.h"
#include "cache/file_identity.h"

namespace epochfs::cache {

struct Chunk {
  ChunkKey key;
  FileIdentity identity;
  uint64_t checksum = 0;  // XXH3-64 of data
  ChunkBuffer data;

  size_t size() const { return data.size(); }
  // True when data still matches checksum.
  bool verify() const;
};

using ChunkRef = std::shared_ptr<const Chunk>;

// Builds a chunk and computes its checksum.
ChunkRef makeChunk(const ChunkKey& key, const FileIdentity& id, ChunkBuffer data);
// The same over a copy of `bytes` (tests and tools).
ChunkRef makeChunk(const ChunkKey& key, const FileIdentity& id, const std::vector<char>& bytes);

}  // namespace epochfs::cache
