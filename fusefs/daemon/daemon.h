// Daemon: the composition root. Owns and wires the concrete objects of one
// mount (source, namespace snapshot, tiers, chunk cache, FUSE server, admin
// server) and answers the admin commands from their counters.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "cache/chunk_cache.h"
#include "cache/chunk_store.h"
#include "cache/posix_source.h"
#include "cache/ram_tier.h"
#include "fusefs/admin/admin_commands.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/admin/metrics_http_server.h"
#include "fusefs/daemon/allocator_trimmer.h"
#include "fusefs/daemon/memory_pressure_watcher.h"
#include "fusefs/daemon/mount_options.h"
#include "fusefs/daemon/s3_dataset.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/file_index.h"
#include "fusefs/fuse_server.h"
#include "fusefs/kernel_page_pusher.h"
#include "prefetch/prefetcher.h"
#include "prefetch/torch_order_follower.h"
#include "transport/cluster.h"

namespace epochfs::fusefs {

class Daemon {
 public:
  explicit Daemon(MountOptions options);
  ~Daemon();

  // Running as a supervisor's worker (fusefs/daemon/supervisor.h); set before start().
  struct Supervision {
    int adoptFd = -1;                 // a restart: the mount's /dev/fuse descriptor
    std::string initMessage;          // a restart: the kernel's FUSE_INIT to replay
    std::string expectedFingerprint;  // a restart: the first worker's namespace
    int namespaceFd = -1;  // a restart: the namespace image (owned; namespace_handover.h)
    std::function<void(int memfd)> sendNamespace;  // hands a namespace image to the supervisor
  };
  void setSupervision(Supervision s) { supervision_ = std::move(s); }
  // An s3:// source: the credentials main() resolved (nullopt: unsigned) and
  // where they came from; set before start().
  void setS3Credentials(std::optional<transport::s3::Credentials> c, std::string origin,
                        transport::s3::CredentialsFile file = {}) {
    s3Credentials_ = std::move(c);
    s3CredentialsOrigin_ = std::move(origin);
    s3CredentialsFile_ = std::move(file);
  }

  // Snapshots the source, opens the tiers, mounts and starts the admin
  // socket. On success the mount is in place; run() serves it.
  cache::Status start();
  // Serves until unmounted or signalled, then unmounts. Returns the exit code.
  int run();
  // Ends run() through the normal stop path, as `kill -TERM` does
  // (`restart`: as the supervisor's SIGUSR2); any thread, any time.
  void stop(bool restart);

  // After start(), supervised only: what the supervisor keeps of the mount.
  int fuseFd() const { return fuse_ ? fuse_->fuseFd() : -1; }
  const std::string& initMessage() const;
  std::string namespaceFingerprint() const;
  // Supervised: hands the live namespace to the supervisor (after start(),
  // unless it came from the supervisor; after each refresh that changed it).
  void publishNamespace();
  // After a refresh that changed the live namespace: the file index, the
  // kernel's stale entries, then publishNamespace().
  void namespaceRefreshed(const RefreshReport& r);
  // "walk", "listing" or "handed over" (status.dataset.namespace_source).
  const std::string& namespaceSource() const { return namespaceSource_; }
  // start() failed because the source tree is not the one the mount showed.
  bool namespaceChanged() const { return namespaceChanged_; }

 private:
  // Clamps --ram-cache so that the tier and the daemon's fixed costs fit the
  // memory limit (memory_limit.h fitRamCache); sizes the peer receive pool.
  void fitMemory();
  void startMemoryWatch();
  // Chunk buffers from huge-page slabs per --huge-pages (after the watcher).
  void enableHugePageSlabs();
  cache::Status openTiers();
  cache::Status startCluster();
  // Opens the source (a directory, or an object store) and snapshots it.
  cache::Status openSource();
  cache::Result<DatasetNamespace> snapshotSource();
  // A restart's handed-over namespace if usable, else snapshotSource().
  cache::Result<DatasetNamespace> loadNamespace();

  MountOptions options_;
  std::optional<Supervision> supervision_;
  bool namespaceChanged_ = false;
  std::string namespaceSource_;
  std::mutex publishMu_;  // one publishNamespace() at a time
  std::chrono::steady_clock::time_point startedAt_;
  uint64_t datasetId_ = 0;
  double snapshotSeconds_ = 0;
  std::optional<transport::s3::Credentials> s3Credentials_;
  std::string s3CredentialsOrigin_;
  transport::s3::CredentialsFile s3CredentialsFile_;  // re-read when it changes
  std::unique_ptr<cache::PosixSource> posix_;         // a directory source
  std::unique_ptr<S3Dataset> s3_;                     // or an s3:// one
  cache::Source* source_ = nullptr;                   // whichever it is
  std::unique_ptr<cache::Source> delayed_;            // --inject-source-latency (testing)
  std::unique_ptr<DatasetNamespace> namespace_;
  std::unique_ptr<cache::RamTier> ram_;
  uint64_t receivePoolBytes_ = 0;                    // fitMemory()
  std::unique_ptr<MemoryPressureWatcher> memWatch_;  // --memory-watch, stopped before ram_ goes
  std::unique_ptr<AllocatorTrimmer> trimmer_;        // freed memory back to the kernel
  std::unique_ptr<cache::ChunkStore> disk_;
  std::unique_ptr<cache::ChunkCache> cache_;
  std::unique_ptr<FileIndex> fileIndex_;  // what peers and the pusher name (clustered or pushing)
  // --peers/--hostfile/--slurm: the other nodes' caches. Declared after
  // cache_ and fileIndex_ so it stops (its serve threads use them) before
  // they go.
  std::unique_ptr<transport::Cluster> cluster_;
  // cluster_ lent to cache_ (its PeerSource) and ram_ (its OwnershipView).
  // Declared after cluster_: they end, waiting for calls in progress, before
  // it goes.
  cache::Lease peersLease_, ownershipLease_;
  // --push-page-cache: outlives prefetcher_ (closed before fuse_ goes).
  std::unique_ptr<KernelPagePusher> pusher_;
  std::unique_ptr<prefetch::Prefetcher> prefetcher_;
  cache::Lease advisorLease_;  // prefetcher_ lent to ram_ (EvictionAdvisor); ends before it goes
  std::unique_ptr<FuseServer> fuse_;
  std::atomic<FuseServer*> mounted_{nullptr};  // fuse_ once mounted, for stop() from admin threads
  std::atomic<int> stopRequested_{0};          // 1: stop, 2: restart (stop() before the mount)
  // Zero-change mode: built in the background after the mount.
  void setUpTorchOrder();
  std::unique_ptr<prefetch::TorchOrderFollower> followerOwner_;
  std::atomic<prefetch::TorchOrderFollower*> follower_{nullptr};
  std::thread orderSetup_;
  std::unique_ptr<AdminCommands> adminCommands_;
  AdminServer admin_;
  std::unique_ptr<MetricsHttpServer> metricsHttp_;  // --metrics-port
};

}  // namespace epochfs::fusefs
