// AdminCommands: what the admin socket can ask of a mount (status, stats,
// order, ...) — the handlers registered on the AdminServer, answering from
// the mount's parts (MountState, non-owning) and enforcing who may do what.
#pragma once

#include <atomic>
#include <chrono>

#include <nlohmann/json.hpp>

#include "cache/chunk_cache.h"
#include "cache/ram_tier.h"
#include "fusefs/admin_server.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/mount_options.h"
#include "prefetch/prefetcher.h"
#include "prefetch/torch_order_follower.h"

namespace epochfs::fusefs {

// The parts of a running mount the admin commands read and steer.
struct MountState {
  const MountOptions& options;
  const std::chrono::steady_clock::time_point& startedAt;
  const double& snapshotSeconds;
  DatasetNamespace& ns;
  cache::RamTier& ram;
  cache::ChunkStore* disk;  // null without --cache-dir
  cache::ChunkCache& cache;
  prefetch::Prefetcher& prefetcher;
  std::atomic<prefetch::TorchOrderFollower*>& follower;
};

class AdminCommands {
 public:
  explicit AdminCommands(const MountState& mount);
  void registerAll(AdminServer& server);

  nlohmann::json status() const;
  nlohmann::json stats() const;

 private:
  // Mutating commands: the daemon's owner and root only.
  static void requireOwner(const AdminSession& session);

  MountState m_;
};

}  // namespace epochfs::fusefs
