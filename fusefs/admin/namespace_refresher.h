// NamespaceRefresher: `epochctl refresh` — re-snapshots the source (walks it, or lists it) and
// brings the live namespace up to date where that is safe while the mount serves:
//
// - changed entries (size, mtime, ctime, inode, mode, owner) get the new
//   attributes (DatasetNamespace::setAttr) and a regular file's cached chunks
//   are dropped from every tier (ChunkCache::invalidate);
// - removed entries are marked gone (lookups and readdir stop showing them);
// - added entries are reported only: the live inode table is a vector that
//   readers index without a lock, so growing it in place is not safe; a
//   remount shows them (`remount_needed`).
//
// The kernel's own caches are not invalidated: in the default immutable mode
// it may keep serving a changed file's old attributes and pages until it drops
// them (docs/ADMIN.md). Each refresh that finds a difference increments the
// dataset version shown by `status`. Refreshes are serialized. A refresh that
// changed the live namespace calls the `changed` hook.
// Thread-safety: all methods from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/status.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct RefreshReport {
  uint64_t version = 0;                          // the dataset version after this refresh
  uint64_t added = 0, removed = 0, changed = 0;  // entries (files, dirs, symlinks)
  uint64_t invalidatedFiles = 0;                 // regular files whose chunks were dropped
  // Up to kMaxListed paths each (raw bytes), the tops of added/removed subtrees.
  std::vector<std::string> addedPaths, removedPaths, changedPaths;
  bool truncated = false;
  double seconds = 0;
};

class NamespaceRefresher {
 public:
  static constexpr size_t kMaxListed = 100;

  // `snapshot` takes a fresh snapshot of the source: a walk of a POSIX
  // directory, or a listing of an object store's prefix.
  using Snapshot = std::function<cache::Result<DatasetNamespace>()>;
  // `changed` (optional) runs after a refresh that changed the live
  // namespace (attributes, gone entries), before refresh() returns: a
  // supervised worker hands the new namespace to its supervisor.
  NamespaceRefresher(DatasetNamespace& live, cache::ChunkCache& cache, Snapshot snapshot,
                     std::function<void()> changed = {});

  cache::Result<RefreshReport> refresh();

  uint64_t version() const { return version_.load(); }
  uint64_t refreshes() const { return refreshes_.load(); }
  // Entries in the source the live namespace lacks, as of the last refresh.
  uint64_t pendingAdditions() const { return pending_.load(); }

 private:
  void compareDirs(const DatasetNamespace& fresh, DatasetNamespace::Ino oldDir,
                   DatasetNamespace::Ino newDir, RefreshReport& r);
  void markGone(DatasetNamespace::Ino ino, RefreshReport& r);
  static uint64_t subtreeSize(const DatasetNamespace& ns, DatasetNamespace::Ino ino);
  static void list(std::vector<std::string>& v, const std::string& path, RefreshReport& r);

  DatasetNamespace& live_;
  cache::ChunkCache& cache_;
  const Snapshot snapshot_;
  const std::function<void()> changed_;
  bool touched_ = false;  // this refresh set an attribute (guarded by mu_)
  std::mutex mu_;         // one refresh at a time
  std::atomic<uint64_t> version_{1};
  std::atomic<uint64_t> refreshes_{0};
  std::atomic<uint64_t> pending_{0};
};

}  // namespace epochfs::fusefs
