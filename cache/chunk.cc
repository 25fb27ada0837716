#include "cache/chunk.h"

#include "cache/checksum.h"

namespace epochfs::cache {

bool Chunk::verify() const { return checksum == cache::checksum(data.data(), data.size()); }

ChunkRef makeChunk(const ChunkKey& key, const FileIdentity& id, ChunkBuffer data) {
  auto c = std::make_shared<Chunk>();
  c->key = key;
  c->identity = id;
  c->checksum = cache::checksum(data.data(), data.size());
  c->data = std::move(data);
  return c;
}

ChunkRef makeChunk(const ChunkKey& key, const FileIdentity& id, const std::vector<char>& bytes) {
  return makeChunk(key, id, ChunkBuffer::copyOf(bytes));
}

}  // namespace epochfs::cache
