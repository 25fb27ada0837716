// AccessPlan: the order in which one reader stream (a rank) will read the
// dataset in one epoch. An entry is a whole file or a byte range of one (for
// record formats: LMDB, HDF5, Parquet, WebDataset shards). A plan may start at
// position `start` to resume mid-epoch after a checkpoint: entries before it
// are known but not expected to be read. A plan belongs to one job: the
// mount it was registered through when several mounts share a daemon (0 for a
// daemon's only mount); reads through a mount advance only its job's plans.
// Immutable once built; shared by reference between the admin thread and the
// prefetcher.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/file_identity.h"

namespace epochfs::prefetch {

struct PlanEntry {
  std::string relPath;           // relative to the source root
  cache::FileIdentity identity;  // the snapshot's version of the file
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes to read from offset (whole file: its size)
};

// The chunks an entry covers: indexes [first, end) of its file's chunks.
struct ChunkSpan {
  uint32_t first = 0, end = 0;
};
ChunkSpan chunkSpan(const PlanEntry& e, uint32_t chunkSize);

// A whole-file entry: what an open names, and what can be pushed into the
// kernel's page cache.
inline bool isWholeFile(const PlanEntry& e) { return e.offset == 0 && e.length >= e.identity.size; }

class AccessPlan {
 public:
  AccessPlan(int64_t epoch, int rank, uint64_t start, std::vector<PlanEntry> entries,
             uint32_t job = 0);

  int64_t epoch() const { return epoch_; }
  int rank() const { return rank_; }
  uint32_t job() const { return job_; }
  uint64_t start() const { return start_; }
  size_t size() const { return entries_.size(); }
  const PlanEntry& at(size_t pos) const { return entries_[pos]; }
  uint64_t totalBytes() const { return totalBytes_; }

  // Bytes of the entries in [from, to).
  uint64_t bytesBetween(size_t from, size_t to) const { return cumBytes_[to] - cumBytes_[from]; }

  // Positions at which file `fileId` is read, ascending (empty if never).
  const std::vector<uint32_t>* positionsOf(uint64_t fileId) const;

 private:
  int64_t epoch_;
  int rank_;
  uint32_t job_;
  uint64_t start_;
  std::vector<PlanEntry> entries_;
  uint64_t totalBytes_ = 0;
  std::vector<uint64_t> cumBytes_;  // cumBytes_[i]: bytes of entries [0, i)
  std::unordered_map<uint64_t, std::vector<uint32_t>> positions_;
};

}  // namespace epochfs::prefetch
