// CacheCommands: the admin commands that look at or act on what the cache
// holds, file by file — ls (residency), warm (fetch into the cache, with
// progress) and evict (drop from the tiers). Paths in requests are checked by
// fusefs/admin/admin_paths.h; permissions by fusefs/admin/admin_auth.h (ls: readers, who
// must be able to reach the path; warm: admins, who must be able to read each
// file; evict: admins).
//
// Requests and replies (docs/ADMIN.md):
//   ls          {path, children?, offset?} -> {entry, children: [...], next_offset}
//   warm_add    {paths: [...]}             -> {files, bytes, skipped}  (repeatable)
//   warm_start  {threads?}                 -> {files, bytes}
//   warm_progress                          -> {files_total, files_done, bytes_total,
//                                               bytes_done, errors, first_error, seconds, done}
//   evict       {paths: [...] | all: true, tier?: "all"|"ram"|"disk"} -> {files, chunks, bytes}
// A warm job belongs to its connection: it stops when the connection ends.
// Thread-safety: handlers may run concurrently (one connection per thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "cache/ram_tier.h"
#include "fusefs/admin/admin_auth.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/admin/residency.h"
#include "fusefs/admin/warm_job.h"
#include "fusefs/admin_protocol.h"
#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct EvictCounters {
  std::atomic<uint64_t> chunks{0}, bytes{0};
};

class CacheCommands {
 public:
  // Bytes of `children` per ls page, leaving room for the envelope.
  static constexpr size_t kLsPageBytes = 48 * 1024;
  static constexpr unsigned kDefaultWarmThreads = admin::kDefaultWarmThreads;

  CacheCommands(const DatasetNamespace& ns, cache::ChunkCache& cache, cache::RamTier& ram,
                const AdminAuth& auth, uint64_t maxWarmFiles);
  void registerAll(AdminServer& server);

  const WarmCounters& warmCounters() const { return warm_; }
  const EvictCounters& evictCounters() const { return evict_; }

  nlohmann::json ls(const nlohmann::json& req, AdminSession& s) const;
  nlohmann::json warmAdd(const nlohmann::json& req, AdminSession& s);
  nlohmann::json warmStart(const nlohmann::json& req, AdminSession& s);
  nlohmann::json warmProgress(AdminSession& s) const;
  nlohmann::json evict(const nlohmann::json& req, AdminSession& s);

 private:
  // Decodes, checks and resolves one request path; throws AdminError.
  DatasetNamespace::Ino resolve(const nlohmann::json& field) const;
  // The regular files at or below `ino`, in tree order (not following symlinks).
  template <typename Visit>
  void forEachFile(DatasetNamespace::Ino ino, Visit&& visit) const;
  // Drops one file's chunks from the chosen tiers; adds to the totals.
  void evictFile(DatasetNamespace::Ino ino, bool ram, bool disk, uint64_t& chunks, uint64_t& bytes);

  const DatasetNamespace& ns_;
  cache::ChunkCache& cache_;
  cache::RamTier& ram_;
  const AdminAuth& auth_;
  const uint64_t maxWarmFiles_;
  Residency residency_;
  WarmCounters warm_;
  EvictCounters evict_;
};

}  // namespace epochfs::fusefs
