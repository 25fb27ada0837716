#include "fusefs/file_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

namespace epochfs::fusefs {

FileIndex::FileIndex(const DatasetNamespace& ns) : ns_(ns) {
  indexedTo_ = ns_.nodeCount();
  size_t files = 0;  // reserved exactly: a doubling would hold 3x the array at its step
  for (DatasetNamespace::Ino ino = 1; ino <= indexedTo_; ++ino)
    files += S_ISREG(ns_.attr(ino).mode);
  initial_.reserve(files);
  for (DatasetNamespace::Ino ino = 1; ino <= indexedTo_; ++ino) {
    if (!S_ISREG(ns_.attr(ino).mode)) continue;
    const uint64_t id = ns_.fileId(ino);
    initial_.push_back(Entry{static_cast<uint32_t>(id >> 32), static_cast<uint32_t>(id),
                             static_cast<uint32_t>(ino)});
  }
  std::sort(initial_.begin(), initial_.end(), [](const Entry& a, const Entry& b) {
    return a.id() != b.id() ? a.id() < b.id() : a.ino < b.ino;
  });
}

DatasetNamespace::Ino FileIndex::find(uint64_t fileId) const {
  {
    cache::ReaderLock lock(mu_);
    if (auto it = added_.find(fileId); it != added_.end()) return it->second;
  }
  // Of two files with one path (a gone entry and the one that took its
  // place, in a namespace handed over after a refresh) the later inode wins.
  auto it = std::upper_bound(initial_.begin(), initial_.end(), fileId,
                             [](uint64_t id, const Entry& e) { return id < e.id(); });
  if (it == initial_.begin() || std::prev(it)->id() != fileId) return 0;
  return std::prev(it)->ino;
}

void FileIndex::catchUp() {
  cache::MutexLock one(catchUpMu_);
  // New inodes are only appended: read them without the lock, insert under it.
  const DatasetNamespace::Ino to = ns_.nodeCount();
  std::vector<std::pair<uint64_t, DatasetNamespace::Ino>> files;
  for (DatasetNamespace::Ino ino = indexedTo_ + 1; ino <= to; ++ino) {
    if (S_ISREG(ns_.attr(ino).mode)) files.emplace_back(ns_.fileId(ino), ino);
  }
  cache::WriterLock lock(mu_);
  added_.reserve(added_.size() + files.size());
  // A file that took the place of a gone entry of the same path has its id:
  // the new inode wins.
  for (const auto& [id, ino] : files) added_[id] = ino;
  indexedTo_ = to;
}

}  // namespace epochfs::fusefs
