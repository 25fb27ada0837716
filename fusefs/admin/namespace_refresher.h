// NamespaceRefresher: `epochctl refresh` — re-snapshots the source (walks it, or lists it) and
// brings the live namespace up to date where that is safe while the mount serves:
//
// - changed entries (size, mtime, ctime, inode, mode, owner) get the new
//   attributes (DatasetNamespace::setAttr) and a regular file's cached chunks
//   are dropped from every tier (ChunkCache::invalidate);
// - removed entries are marked gone (lookups and readdir stop showing them);
// - added entries are grafted in (DatasetNamespace::graft): they get new
//   inode numbers and are visible at once; a regular file added is read from
//   the source on its first read. Only additions the namespace cannot take
//   (past 4 billion entries) stay pending until a remount (`remount_needed`).
//
// A refresh that changed the live namespace calls the `changed` hook with
// what the kernel may hold stale (RefreshReport::goneEntries, staleInodes):
// the daemon asks the kernel to drop those dentries, attributes, pages and
// listings. Each refresh that finds a difference increments the dataset
// version shown by `status`. Refreshes are serialized.
// Thread-safety: all methods from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct RefreshReport {
  uint64_t version = 0;                          // the dataset version after this refresh
  uint64_t added = 0, removed = 0, changed = 0;  // entries (files, dirs, symlinks)
  uint64_t addedFiles = 0;                       // regular files among those added
  uint64_t notAdded = 0;                         // added entries left out (remount to see)
  uint64_t invalidatedFiles = 0;                 // regular files whose chunks were dropped
  // Up to kMaxListed paths each (raw bytes), the tops of added/removed subtrees.
  std::vector<std::string> addedPaths, removedPaths, changedPaths;
  bool truncated = false;
  // For the kernel's caches (not reported): every (directory, name) that
  // left the live namespace or now names another entry, and every inode
  // whose cached attributes, pages or listing are stale (changed entries,
  // directories whose entries changed).
  std::vector<std::pair<DatasetNamespace::Ino, std::string>> goneEntries;
  std::vector<DatasetNamespace::Ino> staleInodes;
  double seconds = 0;
};

class NamespaceRefresher {
 public:
  static constexpr size_t kMaxListed = 100;

  // `snapshot` takes a fresh snapshot of the source: a walk of a POSIX
  // directory, or a listing of an object store's prefix.
  using Snapshot = std::function<cache::Result<DatasetNamespace>()>;
  // `changed` (optional) runs after a refresh that changed the live
  // namespace (attributes, gone or added entries), before refresh() returns,
  // with the report so far: the daemon drops the kernel's stale entries and
  // a supervised worker hands the new namespace to its supervisor.
  using Changed = std::function<void(const RefreshReport&)>;
  NamespaceRefresher(DatasetNamespace& live, cache::ChunkCache& cache, Snapshot snapshot,
                     Changed changed = {});

  cache::Result<RefreshReport> refresh() EXCLUDES(mu_);

  uint64_t version() const { return version_.load(); }
  uint64_t refreshes() const { return refreshes_.load(); }
  // Entries in the source the live namespace could not take, as of the last refresh.
  uint64_t pendingAdditions() const { return pending_.load(); }

 private:
  void compareDirs(const DatasetNamespace& fresh, DatasetNamespace::Ino oldDir,
                   DatasetNamespace::Ino newDir, RefreshReport& r) REQUIRES(mu_);
  void markGone(DatasetNamespace::Ino ino, RefreshReport& r) REQUIRES(mu_);
  static uint64_t subtreeSize(const DatasetNamespace& ns, DatasetNamespace::Ino ino);
  static void list(std::vector<std::string>& v, const std::string& path, RefreshReport& r);

  DatasetNamespace& live_;
  cache::ChunkCache& cache_;
  const Snapshot snapshot_;
  const Changed changed_;
  cache::Mutex mu_;                       // one refresh at a time
  bool touched_ GUARDED_BY(mu_) = false;  // this refresh set an attribute or added entries
  std::atomic<uint64_t> version_{1};
  std::atomic<uint64_t> refreshes_{0};
  std::atomic<uint64_t> pending_{0};
};

}  // namespace epochfs::fusefs
