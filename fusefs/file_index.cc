#include "fusefs/file_index.h"

#include <sys/stat.h>

#include <mutex>
#include <utility>
#include <vector>

namespace epochfs::fusefs {

FileIndex::FileIndex(const DatasetNamespace& ns) : ns_(ns) { catchUp(); }

DatasetNamespace::Ino FileIndex::find(uint64_t fileId) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = byId_.find(fileId);
  return it == byId_.end() ? 0 : it->second;
}

void FileIndex::catchUp() {
  std::lock_guard<std::mutex> one(catchUpMu_);
  // New inodes are only appended: read them without the lock, insert under it.
  const DatasetNamespace::Ino to = ns_.nodeCount();
  std::vector<std::pair<uint64_t, DatasetNamespace::Ino>> files;
  for (DatasetNamespace::Ino ino = indexedTo_ + 1; ino <= to; ++ino) {
    if (S_ISREG(ns_.attr(ino).mode)) files.emplace_back(ns_.fileId(ino), ino);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  byId_.reserve(byId_.size() + files.size());
  // A file that took the place of a gone entry of the same path has its id:
  // the new inode wins.
  for (const auto& [id, ino] : files) byId_[id] = ino;
  indexedTo_ = to;
}

}  // namespace epochfs::fusefs
