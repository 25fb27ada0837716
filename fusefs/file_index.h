// FileIndex: the regular files of a DatasetNamespace by file id — what peers
// and the page pusher name a file by. It follows a namespace that grows at a
// refresh when catchUp() is called after the refresh.
// Thread-safety: find() from any thread, concurrently with catchUp().
#pragma once

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

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
  const DatasetNamespace& ns_;
  mutable std::shared_mutex mu_;  // shared: find(); exclusive: catchUp()'s insertions
  std::unordered_map<uint64_t, DatasetNamespace::Ino> byId_;
  std::mutex catchUpMu_;                 // one catchUp() at a time
  DatasetNamespace::Ino indexedTo_ = 0;  // inodes up to this one are indexed (catchUpMu_)
};

}  // namespace epochfs::fusefs
