// Residency: how much of a file or directory tree the cache holds, tier by
// tier — `epochctl ls`, like fincore/vmtouch for the daemon's cache. Walks the
// file's chunk keys (ChunkCache::keyFor) and asks each tier
// ChunkStore::contains (no I/O, any version; a changed file's old chunks are
// dropped when the change is seen). A directory sums the regular files below
// it, not following symlinks.
// Thread-safety: const; safe alongside reads (tiers are thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct ResidencyTotals {
  uint64_t files = 0;  // regular files counted
  uint64_t bytes = 0;  // their sizes
  uint64_t chunks = 0;
  uint64_t ramChunks = 0, ramBytes = 0;
  uint64_t diskChunks = 0, diskBytes = 0;
  uint64_t cachedChunks = 0, cachedBytes = 0;  // in at least one tier
  uint64_t skippedDirs = 0;                    // directories the caller may not descend

  void add(const ResidencyTotals& o);
};

class Residency {
 public:
  // May `dir` be descended into (for the caller)? Unreadable subtrees are
  // skipped and counted in skippedDirs.
  using DirFilter = std::function<bool(DatasetNamespace::Ino dir)>;

  Residency(const DatasetNamespace& ns, cache::ChunkCache& cache) : ns_(ns), cache_(cache) {}

  ResidencyTotals of(DatasetNamespace::Ino ino, const DirFilter& mayDescend) const;

  // The JSON of one `ls` entry (docs/ADMIN.md).
  nlohmann::json toJson(DatasetNamespace::Ino ino, const ResidencyTotals& t) const;

 private:
  void addFile(DatasetNamespace::Ino ino, ResidencyTotals& t) const;

  const DatasetNamespace& ns_;
  cache::ChunkCache& cache_;
};

}  // namespace epochfs::fusefs
