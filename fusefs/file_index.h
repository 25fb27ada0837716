// FileIndex: the regular files of a DatasetNamespace by file id — what peers
// and the page pusher name a file by. It follows a namespace that grows at a
// refresh when catchUp() is called after the refresh.
//
// Memory: 12 bytes a file (ids sorted in one array: a hash map's node, bucket
// and allocator overhead cost ~48), plus a hash map for the files a refresh
// added.
// Thread-safety: find() from any thread, concurrently with catchUp().
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "cache/mutex.h"
#include "cache/shared_mutex.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

class FileIndex {
 public:
  // Indexes every regular file of `ns` now.
  explicit FileIndex(const DatasetNamespace& ns);

  // The inode of file `fileId`, or 0.
  DatasetNamespace::Ino find(uint64_t fileId) const;
  // Adds the regular files the namespace gained since the last call.
  void catchUp();

 private:
  struct Entry {  // 12 bytes, not 16: the id in two halves
    uint32_t idHigh, idLow, ino;
    uint64_t id() const { return uint64_t{idHigh} << 32 | idLow; }
  };
  const DatasetNamespace& ns_;
  std::vector<Entry> initial_;     // the files at construction, by (id, inode); never changes
  mutable cache::SharedMutex mu_;  // shared: find(); exclusive: catchUp()'s insertions
  // Later files, by id.
  std::unordered_map<uint64_t, DatasetNamespace::Ino> added_ GUARDED_BY(mu_);
  cache::Mutex catchUpMu_;  // one catchUp() at a time
  // Inodes up to this one are indexed.
  DatasetNamespace::Ino indexedTo_ GUARDED_BY(catchUpMu_) = 0;
};

}  // namespace epochfs::fusefs
