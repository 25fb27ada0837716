// PeerSource: the cluster seen from the cache (implemented by transport/, so
// cache/ never includes UCX). When a chunk is missing locally and another
// node owns its file, ChunkCache asks the owner through this interface before
// reading the source; any failure (dead, slow or lying peer) falls back to the
// source, so a reader never sees a peer's error. It is also the RAM tier's
// OwnershipView: owned and guest chunks follow the same placement.
#pragma once

#include <string>

#include "cache/chunk.h"
#include "cache/ownership_view.h"
#include "cache/status.h"

namespace epochfs::cache {

class PeerSource : public OwnershipView {
 public:
  ~PeerSource() override = default;

  // Not ownedElsewhere(): this node is among the file's live owners.
  bool ownedHere(uint64_t fileId) const override { return !ownedElsewhere(fileId); }

  // True when another live node owns `fileId` (placement), so a miss should
  // ask it. Cheap; called on every miss.
  virtual bool ownedElsewhere(uint64_t fileId) const = 0;

  // Chunk `key` of the file at version `id`, from its owner (who reads the
  // source if it must). The returned chunk's checksum has been verified.
  virtual Result<ChunkRef> fetch(const std::string& relPath, const FileIdentity& id,
                                 const ChunkKey& key) = 0;
};

}  // namespace epochfs::cache
