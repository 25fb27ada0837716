// Daemon: the composition root. Owns and wires the concrete objects of one
// dataset's daemon (source, namespace snapshot, tiers, chunk cache, admin
// server) and of each of its mounts (a FUSE server, and for a mount after the
// first an admin socket: daemon_mounts.cc), and answers the admin commands
// from their counters. Threading: start() and run() on the main thread; each
// mount's FUSE loop on its own thread (MountSet); join() and the other admin
// callbacks on admin connection threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "cache/chunk_cache.h"
#include "cache/chunk_store.h"
#include "cache/mutex.h"
#include "cache/posix_source.h"
#include "cache/ram_tier.h"
#include "fusefs/admin/admin_commands.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/admin/metrics_http_server.h"
#include "fusefs/daemon/allocator_trimmer.h"
#include "fusefs/daemon/daemon_registry.h"
#include "fusefs/daemon/memory_pressure_watcher.h"
#include "fusefs/daemon/mount_options.h"
#include "fusefs/daemon/mount_set.h"
#include "fusefs/daemon/namespace_exchange.h"
#include "fusefs/daemon/namespace_store.h"
#include "fusefs/daemon/s3_dataset.h"
#include "fusefs/daemon/supervisor_link.h"
#include "fusefs/dataset_namespace.h"
#include "fusefs/file_index.h"
#include "fusefs/fuse_server.h"
#include "fusefs/kernel_page_pusher.h"
#include "prefetch/prefetcher.h"
#include "prefetch/torch_order_jobs.h"
#include "transport/cluster.h"

namespace epochfs::fusefs {

class Daemon {
 public:
  explicit Daemon(MountOptions options);
  ~Daemon();

  // Running as a supervisor's worker (fusefs/daemon/supervisor.h); set before start().
  struct Supervision {
    // A restart: every mount the supervisor holds (their descriptors and
    // FUSE_INIT messages to replay); empty: mount the mountpoint afresh.
    std::vector<HeldMount> resume;
    std::string expectedFingerprint;  // a restart: the first worker's namespace
    int namespaceFd = -1;  // a restart: the namespace image (owned; namespace_handover.h)
    std::function<void(int memfd)> sendNamespace;  // hands a namespace image to the supervisor
    // Hands a new mount's descriptor to the supervisor (the first, a joined one).
    std::function<void(const HeldMount&)> sendMount;
    // A mount went away while others still serve: the supervisor lets go of it.
    std::function<void(const std::string& mountpoint)> sendUnmounted;
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

  std::string namespaceFingerprint() const;
  // After start(): lets later mounts of this dataset join this daemon (the
  // registry entry; fusefs/daemon/daemon_registry.h), unless its options
  // keep it to itself (whyNotShared) or another live daemon is registered.
  void publishShared();
  // Supervised: hands the live namespace to the supervisor (after start(),
  // unless it came from the supervisor; after each refresh that changed it).
  void publishNamespace();
  // After a refresh that changed the live namespace: the file index, the
  // kernel's stale entries, then publishNamespace().
  void namespaceRefreshed(const RefreshReport& r);
  // "walk", "listing", "handed over" or "kept on disk"
  // (status.dataset.namespace_source).
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
  // This dataset's directory under --cache-dir: its disk tier and kept namespace.
  std::string datasetCacheDir() const;
  cache::Status startCluster();
  // Opens the source (a directory, or an object store) and snapshots it.
  cache::Status openSource();
  // `progress`: set to the entries made so far as the walk goes (or null).
  cache::Result<DatasetNamespace> snapshotSource(std::atomic<uint64_t>* progress = nullptr);
  // A restart's handed-over namespace if usable; clustered, one walk per job
  // (exchange_); else the disk tier's kept namespace or snapshotSource().
  cache::Result<DatasetNamespace> loadNamespace();
  // The namespace is loaded: placement over its files, and peers may name them.
  void namespaceLoaded();
  // The FUSE settings every mount of this daemon shares.
  FuseServer::Config fuseConfig() const;
  // Mounts `m.mountpoint` (`resume`: adopts `m.fd` and replays its INIT) as
  // mount `id` with m's owner, allow_other and --order, gives a mount other
  // than 0 an admin socket of its own, and adds it to mounts_.
  cache::Status serveMount(uint32_t id, const HeldMount& m, bool resume);
  // The admin `join` command: one more mountpoint of this dataset.
  cache::Status join(const std::string& mountpoint, bool allowOther, std::optional<uid_t> owner,
                     const std::string& order, const AdminCaller& caller);
  // A mount other than 0 went away: its admin socket goes too.
  void forgetMount(uint32_t id);
  // stats.mount of mount `id` (null once it is gone).
  nlohmann::json mountStats(uint32_t id) const;

  MountOptions options_;
  std::optional<Supervision> supervision_;
  bool namespaceChanged_ = false;
  std::string namespaceSource_;
  cache::Mutex publishMu_;  // one publishNamespace() (and keepNamespace()) at a time
  // A refresh changed the namespace since the mount (publishNamespace encodes
  // it again instead of handing over exchange_'s image).
  std::atomic<bool> refreshedSinceStart_{false};
  // A directory source with --cache-dir: the namespace kept beside the disk
  // tier (null otherwise). A namespace loaded from it (not clustered, not a
  // restart) may predate the mount: each mount checks an entry against the
  // source at its first use.
  std::optional<NamespaceStore> namespaceStore_;
  bool validateFirstUse_ = false;
  // Writes the live namespace to namespaceStore_ (after a walk or a refresh).
  void keepNamespace();
  std::thread keeper_;  // the first keepNamespace() after a walk, beside the mount
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
  // Clustered: the cluster starts before the namespace (which may come from a
  // peer); its serve threads answer for files only once this is set, after
  // namespace_ and fileIndex_ (release/acquire).
  std::atomic<bool> namespaceReady_{false};
  // Clustered: the namespace's walk or transfer, and the image served down the tree.
  std::unique_ptr<NamespaceExchange> exchange_;
  // exchange_ for the serve threads, set once it exists (release/acquire).
  std::atomic<const NamespaceExchange*> exchangeServing_{nullptr};
  // --peers/--hostfile/--slurm: the other nodes' caches. Declared after
  // cache_ and fileIndex_ so it stops (its serve threads use them) before
  // they go.
  std::unique_ptr<transport::Cluster> cluster_;
  // cluster_ lent to cache_ (its PeerSource) and ram_ (its OwnershipView).
  // Declared after cluster_: they end, waiting for calls in progress, before
  // it goes.
  cache::Lease peersLease_, ownershipLease_;
  // --push-page-cache: outlives prefetcher_ (closed before mounts_ goes).
  std::unique_ptr<KernelPagePusher> pusher_;
  std::unique_ptr<prefetch::Prefetcher> prefetcher_;
  cache::Lease advisorLease_;  // prefetcher_ lent to ram_ (EvictionAdvisor); ends before it goes
  // Every mount this daemon serves: the first, and those that joined.
  std::unique_ptr<MountSet> mounts_ = std::make_unique<MountSet>();
  cache::Mutex joinMu_;     // one join at a time
  std::string socketPath_;  // mount 0's (the daemon's first) admin socket
  // The admin sockets of the mounts after the first, by mount id (their jobs).
  cache::Mutex socketsMu_;
  std::map<uint32_t, std::unique_ptr<AdminServer>> mountSockets_ GUARDED_BY(socketsMu_);
  uint32_t nextMountId_ GUARDED_BY(joinMu_) = 1;
  std::optional<DaemonRegistry> registry_;  // set when other mounts may join
  // Zero-change mode: each mount's --order torch-distributed (mount 0's from
  // the options, a joined one's from its join), the samples listed once.
  std::optional<prefetch::TorchSamples> listTorchSamples() const;
  cache::Status followTorchOrder(uint32_t id, const std::string& order);
  std::unique_ptr<prefetch::TorchOrderJobs> torchOrders_;
  std::unique_ptr<AdminCommands> adminCommands_;
  AdminServer admin_;
  std::unique_ptr<MetricsHttpServer> metricsHttp_;  // --metrics-port
};

}  // namespace epochfs::fusefs
