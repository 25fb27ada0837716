// AdminCommands: what the admin socket can ask of a mount — the handlers
// registered on the AdminServer, answering from the mount's parts (MountState,
// non-owning) and enforcing who may do what (AdminAuth). Commands (docs/ADMIN.md):
//   readers: status, stats, metrics, schema, plans, plan_entries, chunk_shards,
//            ls, peers, placement
//   admins:  order_begin/append/commit, order_clear, refresh, unmount, upgrade,
//            warm_add/start/progress, evict
//   the daemon's own user: join
// ls, warm and evict live in CacheCommands, peers and placement in
// ClusterCommands. The names: admin_protocol.h.
// The counters of status, stats and metrics are declared once, in the
// MetricRegistry this object owns (mount_metrics.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cache/chunk_cache.h"
#include "cache/ram_tier.h"
#include "fusefs/admin/admin_auth.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/admin/cache_commands.h"
#include "fusefs/admin/cluster_commands.h"
#include "fusefs/admin/metric_registry.h"
#include "fusefs/admin/namespace_refresher.h"
#include "fusefs/admin/plan_registry.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/version_info.h"
#include "prefetch/prefetcher.h"

namespace epochfs::transport::s3 {
struct S3ClientCounters;
}  // namespace epochfs::transport::s3

namespace epochfs::fusefs {

// What the admin side knows of the mount's configuration: a copy made by the
// daemon at start (the options never change while mounted).
struct MountConfig {
  std::string source;
  std::string mountpoint;
  std::string cacheDir;  // "" without a disk tier
  std::optional<gid_t> adminGid;
  uint64_t maxPlanEntries = 0;
  // The memory limit and the budgets derived from it (docs/CONFIGURATION.md).
  uint64_t memoryLimitBytes = 0;
  std::string memoryLimitSource;
  uint64_t ramCacheBytes = 0;
  uint64_t prefetchMemoryBytes = 0;
  std::string pushPageCache;  // off, on, sentinels
  nlohmann::json options;     // `status.options`
};

// The daemon's memory-pressure watcher (fusefs/daemon/memory_pressure_watcher.h),
// as `stats.memory.pressure` shows it.
struct MemoryPressureFigures {
  bool watching = false;  // false: no cgroup limit, or --memory-watch off
  uint64_t shrinks = 0;
  uint64_t lowestCapBytes = 0;
  uint64_t workingSetBytes = 0;
};

// The parts of a running mount the admin commands read and steer. The
// references are to objects the daemon owns and keeps until the admin server
// has stopped.
struct MountState {
  MountConfig config;
  std::chrono::steady_clock::time_point startedAt;
  double snapshotSeconds = 0;
  DatasetNamespace& ns;
  cache::RamTier& ram;
  cache::ChunkStore* disk;  // null without --cache-dir
  cache::ChunkCache& cache;
  prefetch::Prefetcher& prefetcher;
  // The epoch the zero-change order (--order torch-distributed) of mount
  // `job` detected (-1: not yet); nullopt: that mount follows none.
  std::function<std::optional<int64_t>(uint32_t job)> torchEpoch;
  // A fresh snapshot of the source, for refresh (NamespaceRefresher::Snapshot).
  std::function<cache::Result<DatasetNamespace>()> snapshot;
  // The source's own section of `status` (an object store's requests); unset: none.
  std::function<nlohmann::json()> sourceStatus;
  // An s3:// mount's request counters (stats.s3.*); null: not an object store.
  const transport::s3::S3ClientCounters* s3 = nullptr;
  const transport::Cluster* cluster = nullptr;  // null: not clustered
  bool supervised = false;                      // upgrade restarts the worker (else it is refused)
  // Where the namespace came from: "walk", "listing" or "handed over" (a
  // restarted worker's, from its supervisor).
  std::string namespaceSource;
  // Clustered: the job's one walk ({"walker", "from_member", "image_bytes",
  // "seconds", "counted_out", "fingerprint"}), status.dataset.namespace_exchange;
  // unset: none.
  std::function<nlohmann::json()> namespaceOrigin;
  // Called after a refresh changed the live namespace; unset: nothing.
  NamespaceRefresher::Changed namespaceUpdated;
  // Ends the mount through the daemon's normal stop path (`restart`: the
  // supervisor starts the binary on disk again); unset: unmount is refused.
  std::function<void(bool restart)> stop;
  // One more mountpoint of this dataset, mounted for `caller` (the join
  // command); unset: joins are refused.
  // `order`: its --order (torch-distributed:...), or empty.
  std::function<cache::Status(const std::string& mountpoint, bool allowOther,
                              std::optional<uid_t> owner, const std::string& order,
                              const AdminCaller& caller)>
      join;
  // Every mountpoint the daemon serves (status.mounts); unset: config.mountpoint.
  std::function<std::vector<std::string>()> mountpoints;
  // Unmounts the mount `id` alone (the unmount command; the daemon ends with
  // its last mount) and returns its mountpoint; unset: unmount stops the daemon.
  std::function<cache::Result<std::string>(uint32_t id)> unmountOne;
  // The mountpoint of mount `id` while it is served: the unmount command's
  // answer, sent before unmountOne runs (the daemon may end with it).
  std::function<cache::Result<std::string>(uint32_t id)> servedMount;
  // stats.mount: what the readers of mount `id` asked; unset: none.
  std::function<nlohmann::json(uint32_t id)> mountStats;
  // The libraries the daemon runs with, for `status` ({"fuse_protocol",
  // "kernel_fuse_protocol", "libfuse", "ucx"}); unset: null.
  std::function<nlohmann::json()> libraries;
  // The process's resident set size (stats.memory.rss_bytes); unset: 0.
  std::function<uint64_t()> residentBytes;
  // The memory-pressure watcher's figures; unset: not watching.
  std::function<MemoryPressureFigures()> memoryPressure;
};

class AdminCommands {
 public:
  static constexpr const char* kVersion = kEpochfsVersion;

  explicit AdminCommands(const MountState& mount);
  // Declares the mount's counters and registers every command; `server` must
  // outlive this object's use. Fails on a counter declared twice.
  cache::Status registerAll(AdminServer& server);
  // Registers every command on the socket of one more mount of the daemon
  // (AdminServer::setMount says which), after registerAll.
  void registerMount(AdminServer& server) { registerHandlers(server); }

  nlohmann::json status() const;
  nlohmann::json stats() const;
  // Prometheus text exposition (docs/METRICS.md).
  std::string metricsText() const;
  // The port --metrics-port bound, shown by status (-1: none).
  void setMetricsPort(int port) { metricsPort_.store(port); }

 private:
  void registerHandlers(AdminServer& server);
  void registerOrder(AdminServer& server);
  // chunk_shards: the RAM shard (among RamTier::kMaxShards, a hex digit) of
  // each chunk asked for, so that `epochctl mrc` partitions chunks as this
  // mount does. Files are [file id or path, first chunk, chunks]; an unknown
  // path answers null.
  nlohmann::json chunkShards(const nlohmann::json& req) const;

  MountState m_;
  AdminAuth auth_;
  CacheCommands cacheCommands_;
  ClusterCommands clusterCommands_;
  NamespaceRefresher refresher_;
  PlanRegistry plans_;
  MetricRegistry metrics_;
  const AdminServer* server_ = nullptr;  // for its counters and socket path
  std::atomic<int> metricsPort_{-1};
};

}  // namespace epochfs::fusefs
