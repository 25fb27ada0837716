#include "fusefs/daemon/daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "cache/chunk_buffer_pool.h"
#include "cache/delayed_source.h"
#include "cache/disk_tier.h"
#include "cache/ram_tier.h"
#include "fusefs/admin/admin_paths.h"
#include "fusefs/admin/plan_builder.h"
#include "fusefs/admin_protocol.h"
#include "fusefs/daemon/memory_limit.h"
#include "fusefs/daemon/supervisor_link.h"
#include "fusefs/namespace_image_folder.h"
#include "fusefs/version_info.h"
#include "prefetch/image_folder_samples.h"
#include "transport/membership.h"
#include "transport/peer_auth.h"
#include "transport/ucx_version.h"

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;

namespace {

// The admin side's copy of the options (status.options, the budgets, paths).
MountConfig adminConfig(const MountOptions& o) {
  MountConfig c;
  c.source = o.source;
  c.mountpoint = o.mountpoint;
  c.cacheDir = o.cacheDir;
  c.adminGid = o.adminGid;
  c.maxPlanEntries = o.maxPlanEntries;
  c.memoryLimitBytes = o.memoryLimitBytes;
  c.memoryLimitSource = o.memoryLimitSource;
  c.ramCacheBytes = o.ramCacheBytes;
  c.prefetchMemoryBytes = o.prefetchMemory;
  c.pushPageCache = o.pushPageCache == MountOptions::PushMode::kOpens       ? "on"
                    : o.pushPageCache == MountOptions::PushMode::kSentinels ? "sentinels"
                                                                            : "off";
  c.options = {{"ram_cache", o.ramCacheBytes},
               {"cache_dir", o.cacheDir},
               {"disk_cache", o.diskCacheBytes},
               {"chunk_size", o.chunkSize},
               {"prefetch_memory", o.prefetchMemory},
               {"memory_limit", o.memoryLimitBytes},
               {"memory_limit_source", o.memoryLimitSource},
               {"threads", o.threads},
               {"revalidate", o.revalidateSeconds},
               {"allow_other", o.allowOther},
               {"admin_group", o.adminGroup.empty() ? json(nullptr) : json(o.adminGroup)},
               {"command_line", o.given}};
  return c;
}

}  // namespace

Daemon::Daemon(MountOptions options) : options_(std::move(options)) {}

Daemon::~Daemon() {
  if (keeper_.joinable()) keeper_.join();
  trimmer_.reset();
  if (metricsHttp_) metricsHttp_->stop();
  admin_.stop();
  memWatch_.reset();              // after the admin server: `stats` reads its figures
  if (pusher_) pusher_->close();  // no notification on a session about to go
  mounts_.reset();                // unmounts what is still mounted
  torchOrders_.reset();           // its listing thread and followers
  // The rest goes in reverse order of declaration (daemon.h):
  // the prefetcher, after its advisor lease ended (an insert consulting it
  // finishes first); the cluster, after its leases ended, then its threads
  // (they use cache_ and fileIndex_); then the cache, tiers and source.
}

std::optional<prefetch::TorchSamples> Daemon::listTorchSamples() const {
  // A directory is listed as torchvision lists it; an object store's
  // listing is the namespace itself.
  auto listed =
      s3_ ? imageFolderSamplesOf(*namespace_) : prefetch::listImageFolderSamples(options_.source);
  if (!listed.isOk()) {
    spdlog::error("--order torch-distributed: {}", listed.status().message());
    return std::nullopt;
  }
  // ImageFolder's paths may pass through symlinks; plans name the real file.
  std::vector<std::optional<prefetch::PlanEntry>> samples;
  samples.reserve(listed->samples.size());
  size_t unresolved = 0;
  for (const auto& s : listed->samples) {
    auto ino = resolveAdminPath(*namespace_, s.relPath);
    if (!ino.isOk() && !s3_) {
      char* real = realpath((options_.source + "/" + s.relPath).c_str(), nullptr);
      const std::string prefix = options_.source + "/";
      if (real != nullptr && std::string(real).rfind(prefix, 0) == 0) {
        ino = resolveAdminPath(*namespace_, std::string(real).substr(prefix.size()));
      }
      free(real);
    }
    if (!ino.isOk() || !S_ISREG(namespace_->attr(*ino).mode)) {
      samples.emplace_back();
      ++unresolved;
      continue;
    }
    prefetch::PlanEntry e;
    e.relPath = namespace_->path(*ino);
    e.identity = namespace_->identity(*ino);
    e.length = e.identity.size;
    samples.emplace_back(std::move(e));
  }
  spdlog::info("--order torch-distributed: {} samples in {} classes ({} not cacheable)",
               samples.size(), listed->classes.size(), unresolved);
  return samples;
}

Status Daemon::followTorchOrder(uint32_t id, const std::string& order) {
  if (order.empty()) return Status::ok();
  auto spec = parseTorchOrder(order);
  if (!spec.isOk()) return Status::invalidArgument("--order: " + spec.status().message());
  torchOrders_->follow(id, *spec);
  return Status::ok();
}

void Daemon::fitMemory() {
  const uint64_t limit = options_.memoryLimitBytes;
  if (limit == 0) return;
  const bool clustered = options_.clustered();
  receivePoolBytes_ = receivePoolBytesFor(limit);
  const RamCacheFit fit =
      fitRamCache(limit, options_.ramCacheBytes, clustered ? options_.prefetchMemory : 0,
                  clustered ? receivePoolBytes_ : 0);
  if (!fit.clamped) return;
  constexpr double kMiB = 1 << 20;
  spdlog::warn(
      "--ram-cache {:.1f} MiB does not fit the memory limit {:.1f} MiB ({}) beside the "
      "daemon's fixed costs ({:.1f} MiB: base {:.0f}, peer receive pool {:.1f}, guests' "
      "extra = prefetch memory {:.1f}): RAM tier clamped to {:.1f} MiB",
      options_.ramCacheBytes / kMiB, limit / kMiB, options_.memoryLimitSource,
      fit.fixedBytes / kMiB, kDaemonBaseBytes / kMiB, (clustered ? receivePoolBytes_ : 0) / kMiB,
      (clustered ? options_.prefetchMemory : 0) / kMiB, fit.ramCacheBytes / kMiB);
  options_.ramCacheBytes = fit.ramCacheBytes;
}

void Daemon::startMemoryWatch() {
  // Only a cgroup limit is watched: it is where the kernel OOM-kills the daemon
  // for its job's memory (memory_pressure_watcher.h).
  const CgroupUsageFiles files = options_.memoryLimitSource == "MemTotal"
                                     ? CgroupUsageFiles{}
                                     : cgroupUsageFiles(options_.memoryLimitSource);
  uint64_t probe = 0;
  if (!options_.memoryWatch || files.empty() || !readCgroupWorkingSet(files, &probe)) return;
  MemoryPressurePolicy policy;
  policy.limitBytes = options_.memoryLimitBytes;
  policy.tierMaxBytes = ram_->usage().capacityBytes;
  policy.marginBytes = pressureMarginBytes(options_.memoryLimitBytes);
  memWatch_ = std::make_unique<MemoryPressureWatcher>(
      *ram_, policy, [files](uint64_t* ws) { return readCgroupWorkingSet(files, ws); },
      options_.memoryLimitSource);
  memWatch_->start();
}

void Daemon::enableHugePageSlabs() {
  // Not under AddressSanitizer, which checks the bounds of malloc'd buffers
  // only. `auto` leaves them off under a watched cgroup limit: an evicted
  // chunk's memory stays in its slab (a huge page is not given back in part),
  // so the watcher's tier caps would free little and cascade (measured in the
  // lab: 8-17 shrinks an epoch at p = 2, 0-2 without the slabs).
  using HugePages = MountOptions::HugePages;
  bool on = options_.hugePages == HugePages::kOn ||
            (options_.hugePages == HugePages::kAuto && memWatch_ == nullptr);
#if defined(__SANITIZE_ADDRESS__)
  on = false;
#endif
  cache::ChunkBufferPool::global().enableHugePageSlabs(on);
}

std::string Daemon::datasetCacheDir() const {
  char sub[64];
  snprintf(sub, sizeof sub, "/epochfs-%016llx", static_cast<unsigned long long>(datasetId_));
  return options_.cacheDir + sub;
}

Status Daemon::openTiers() {
  // In a cluster, guests (other nodes' chunks, peer prefetch) get the room the
  // own share leaves free plus the prefetch memory (cache/ram_tier.h).
  ram_ = std::make_unique<cache::RamTier>(options_.ramCacheBytes,
                                          options_.clustered() ? options_.prefetchMemory : 0);
  if (options_.cacheDir.empty()) return Status::ok();
  cache::DiskTierOptions d;
  d.dir = datasetCacheDir();
  d.capacityBytes = options_.diskCacheBytes;
  d.datasetId = datasetId_;
  d.faults = cache::DiskFaults::fromEnvironment();  // test-only fault hook (unset: none)
  auto disk = cache::DiskTier::open(d);
  if (!disk.isOk()) return disk.status();
  disk_ = std::move(disk).value();
  return Status::ok();
}

Status Daemon::startCluster() {
  if (!options_.clustered()) return Status::ok();
  transport::MembershipSpec spec;
  spec.peers = options_.clusterPeers;
  spec.hostfile = options_.clusterHostfile;
  spec.slurm = options_.clusterSlurm;
  spec.listen = options_.clusterListen;
  if (options_.clusterNodeId >= 0) spec.nodeId = static_cast<uint32_t>(options_.clusterNodeId);
  spec.defaultPort = options_.clusterPort;
  auto mb = transport::resolveMembership(spec);
  if (!mb.isOk()) return mb.status();
  auto secret = transport::loadSecretFile(options_.secretFile);
  if (!secret.isOk()) return secret.status();
  transport::ClusterConfig cc;
  cc.members = mb->members;
  cc.selfId = mb->selfId;
  cc.listenHost = mb->listenHost;
  cc.listenPort = mb->listenPort;
  cc.replicas = options_.replicas;
  cc.deadline = std::chrono::milliseconds(options_.peerTimeoutMs);
  cc.secret = std::move(secret).value();
  cc.macPayloads = options_.peerMac;
  cc.capacityBytes = options_.ramCacheBytes + (disk_ ? options_.diskCacheBytes : 0);
  if (receivePoolBytes_ > 0) cc.receivePoolBytes = receivePoolBytes_;  // fitMemory()
  // TEST-ONLY fault hook (transport/peer_fault.h): corrupt the chunks served to peers.
  auto fault = transport::peerFaultFromEnv();
  if (!fault.isOk()) return fault.status();
  cc.fault = *fault;
  // Started without files: the namespace comes after (namespaceLoaded()).
  // Chunks change class in place when the live set (and so placement) changes.
  cc.onPlacementChange = [this] {
    const uint64_t changed = ram_->reclassify();
    if (changed > 0)
      spdlog::info("cluster: placement changed; {} RAM chunks changed class", changed);
  };
  // Peers can name only files of this namespace (fileIndex_, which a refresh
  // extends), by id, at the version they hold; and the namespace's image.
  auto serve = [this](const cache::FileIdentity& id,
                      uint32_t index) -> cache::Result<cache::ChunkRef> {
    if (id.fileId == NamespaceExchange::kFileId) {
      const NamespaceExchange* x = exchangeServing_.load(std::memory_order_acquire);
      if (x == nullptr) return Status::notFound("this member does not serve its namespace");
      return x->serve(id, index);
    }
    // Up (and so live to the others) before its namespace comes: a request
    // then waits for it, within the asker's deadline, rather than sending
    // the asker to the source (the file would be read twice).
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options_.peerTimeoutMs * 3 / 4);
    while (!namespaceReady_.load(std::memory_order_acquire)) {
      if (std::chrono::steady_clock::now() >= until) {
        return Status::unavailable("this member has no namespace yet");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const DatasetNamespace::Ino ino = fileIndex_->find(id.fileId);
    if (ino == 0) return Status::notFound("no such file in this dataset");
    if (!(namespace_->identity(ino) == id)) return Status::stale("another version");
    return cache_->getForPeer(namespace_->path(ino), id, index);
  };
  auto cluster = transport::Cluster::start(cc, serve);
  if (!cluster.isOk()) return cluster.status();
  cluster_ = std::move(cluster).value();
  peersLease_ = cache_->lendPeers(*cluster_);
  // Owned and guest chunks of the RAM tier follow the cluster's placement.
  ownershipLease_ = ram_->lendOwnership(*cluster_);
  ram_->reclassify();  // what peers' requests put in before the view was set
  if (options_.namespaceWalkEach) return Status::ok();
  NamespaceExchange::Options xo;
  xo.fanOut = options_.namespaceFanOut;
  xo.stallBound = std::chrono::seconds(options_.namespaceStallSeconds);
  xo.pieceBytes = options_.chunkSize;
  if (s3_) {
    xo.sourceProgress = [this] {
      return s3_->counters().lists.load() + s3_->counters().bytesReceived.load();
    };
  }
  exchange_ = std::make_unique<NamespaceExchange>(*cluster_, std::move(xo));
  exchangeServing_.store(exchange_.get(), std::memory_order_release);
  return Status::ok();
}

Status Daemon::start() {
  startedAt_ = std::chrono::steady_clock::now();
  // Keyed by the credentials, before the source takes them.
  if (whyNotShared(options_).empty()) {
    auto r = DaemonRegistry::forDataset(options_, s3Credentials_ ? &*s3Credentials_ : nullptr);
    if (r.isOk()) {
      registry_.emplace(std::move(r).value());
    } else {
      spdlog::warn("other mounts of this dataset cannot join this daemon: {}",
                   r.status().message());
    }
  }
  if (Status s = openSource(); !s.isOk()) return s;
  fitMemory();
  Status s = openTiers();
  if (!s.isOk()) return s;
  cache::ChunkCache::Options co;
  co.datasetId = datasetId_;
  co.chunkSize = options_.chunkSize;
  cache::Source* reads = source_;
  if (options_.injectSourceLatencyMs > 0) {
    delayed_ = std::make_unique<cache::DelayedSource>(
        *source_, std::chrono::milliseconds(options_.injectSourceLatencyMs));
    reads = delayed_.get();
  }
  cache_ = std::make_unique<cache::ChunkCache>(co, *reads, *ram_, disk_.get());
  // Before the namespace: clustered, it may come from a peer (one walk per job).
  s = startCluster();
  if (!s.isOk()) return s;

  const auto t0 = std::chrono::steady_clock::now();
  auto ns = loadNamespace();
  if (!ns.isOk()) return ns.status();
  namespace_ = std::make_unique<DatasetNamespace>(std::move(ns).value());
  snapshotSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (supervision_ && !supervision_->expectedFingerprint.empty() &&
      supervision_->expectedFingerprint != namespaceFingerprint()) {
    // The kernel holds node ids of the first snapshot: another tree would
    // give them to other files.
    namespaceChanged_ = true;
    return Status::stale(
        "the source changed since it was mounted: a new daemon "
        "cannot resume this mount");
  }
  spdlog::info("snapshot: {} files, {} dirs, {} bytes in {:.2f}s", namespace_->fileCount(),
               namespace_->dirCount(), namespace_->totalBytes(), snapshotSeconds_);
  if (options_.clustered() || options_.pushPageCache != MountOptions::PushMode::kOff) {
    fileIndex_ = std::make_unique<FileIndex>(*namespace_);
  }
  namespaceLoaded();
  // For the next mount (the directory exists now); a large image takes a
  // while to write: beside the mount, not before it.
  if (namespaceSource_ == "walk" && namespaceStore_)
    keeper_ = std::thread([this] { keepNamespace(); });
  // Freed chunks' buffers, already faulted in, for the next source reads
  // (before the watcher, which zeroes this limit under pressure).
  cache::ChunkBufferPool::global().setLimits(
      cache::ChunkBufferPool::idleLimitFor(options_.ramCacheBytes), options_.chunkSize);
  startMemoryWatch();
  enableHugePageSlabs();
  trimmer_ = std::make_unique<AllocatorTrimmer>(AllocatorTrimmer::slackFor(options_.ramCacheBytes));
  trimmer_->start();

  socketPath_ = options_.adminSocket;
  if (socketPath_.empty()) {
    auto p = AdminServer::defaultPath(options_.mountpoint);
    if (!p.isOk()) return p.status();
    socketPath_ = *p;
  }
  prefetch::PrefetchOptions po;
  po.workers = options_.prefetchThreads;
  po.windowFiles = options_.prefetchWindow;
  po.memoryBytes = options_.prefetchMemory;
  // Prefetched, unread data lives in the RAM tier: keep it to 1/16 of it so the
  // lead never displaces much of what order-aware eviction keeps for later.
  po.maxLeadBytes = std::max<uint64_t>(options_.ramCacheBytes / 16, options_.chunkSize);
  // Pushed files are read without the daemon: opens, or the reads of
  // un-pushed sentinel entries, carry the position (prefetch/position_source.h).
  po.position = options_.pushPageCache == MountOptions::PushMode::kOpens
                    ? prefetch::PositionMode::kOpens
                : options_.pushPageCache == MountOptions::PushMode::kSentinels
                    ? prefetch::PositionMode::kSentinels
                    : prefetch::PositionMode::kReads;
  prefetcher_ = std::make_unique<prefetch::Prefetcher>(po, *cache_);
  advisorLease_ = ram_->lendAdvisor(*prefetcher_);
  torchOrders_ = std::make_unique<prefetch::TorchOrderJobs>(*prefetcher_,
                                                            [this] { return listTorchSamples(); });
  prefetcher_->setReadObserver(
      [this](uint64_t fileId, uint32_t job) { torchOrders_->onRead(fileId, job); });

  MountState state{
      .config = adminConfig(options_),
      .startedAt = startedAt_,
      .snapshotSeconds = snapshotSeconds_,
      .ns = *namespace_,
      .ram = *ram_,
      .disk = disk_.get(),
      .cache = *cache_,
      .prefetcher = *prefetcher_,
      .torchEpoch = [this](uint32_t job) { return torchOrders_->epoch(job); },
      .snapshot = [this] { return snapshotSource(); },
      .sourceStatus =
          s3_ ? std::function<json()>([this] { return s3_->status(); }) : std::function<json()>(),
      .s3 = s3_ ? &s3_->counters() : nullptr,
      .cluster = cluster_.get(),
      .supervised = supervision_.has_value(),
      .namespaceSource = namespaceSource_,
      .namespaceOrigin = exchange_ ? std::function<json()>([this] {
        const auto o = exchange_->origin();
        return json{{"walker", o.walker},          {"from_member", o.parent},
                    {"image_bytes", o.imageBytes}, {"seconds", o.waitedSeconds},
                    {"counted_out", o.countedOut}, {"fingerprint", namespaceFingerprint()}};
      })
                                   : std::function<json()>(),
      .namespaceUpdated = [this](const RefreshReport& r) { namespaceRefreshed(r); },
      .stop = [this](bool restart) { stop(restart); },
      .join =
          [this](const std::string& mountpoint, bool allowOther, std::optional<uid_t> owner,
                 const std::string& order, const AdminCaller& caller) {
            return join(mountpoint, allowOther, owner, order, caller);
          },
      .mountpoints = [this] { return mounts_->mountpoints(); },
      .unmountOne = [this](uint32_t id) { return mounts_->unmount(id); },
      .servedMount = [this](uint32_t id) { return mounts_->served(id); },
      .mountStats = [this](uint32_t id) { return mountStats(id); },
      .libraries = [this]() -> json {
        std::string protocol, kernel;
        mounts_->forEach([&](uint32_t, const std::string&, FuseServer& f) {
          if (protocol.empty()) protocol = f.protocol();
          if (kernel.empty()) kernel = f.kernelProtocol();
        });
        return {{"fuse_protocol", protocol.empty() ? json(nullptr) : json(protocol)},
                {"kernel_fuse_protocol", kernel.empty() ? json(nullptr) : json(kernel)},
                {"libfuse", libfuseVersion()},
                {"ucx", transport::ucxVersion()}};
      },
      .residentBytes = [] { return currentRssBytes(); },
      .memoryPressure =
          [this] {
            const MemoryPressureWatcher* w = memWatch_.get();
            return w ? MemoryPressureFigures{true, w->shrinks(), w->lowestCapBytes(),
                                             w->workingSetBytes()}
                     : MemoryPressureFigures{};
          }};
  adminCommands_ = std::make_unique<AdminCommands>(state);
  // Mount 0 is the one at --mountpoint (resumed or not): its owner steers
  // its orders through the daemon's first socket.
  uid_t owner0 = options_.owner.value_or(geteuid());
  if (supervision_) {
    for (const HeldMount& m : supervision_->resume) {
      if (m.mountpoint == options_.mountpoint) owner0 = m.owner;
    }
  }
  admin_.setMount({0, owner0});
  s = adminCommands_->registerAll(admin_);
  if (!s.isOk()) return s;
  s = admin_.start(socketPath_);
  if (!s.isOk()) return s;
  if (options_.metricsPort >= 0) {
    metricsHttp_ =
        std::make_unique<MetricsHttpServer>([this] { return adminCommands_->metricsText(); });
    s = metricsHttp_->start(static_cast<uint16_t>(options_.metricsPort));
    if (!s.isOk()) return s;
    adminCommands_->setMetricsPort(metricsHttp_->port());
  }

  if (supervision_ && !supervision_->resume.empty()) {
    // A mount whose connection ended meanwhile is let go; the others serve.
    Status last = Status::ok();
    size_t resumed = 0;
    cache::MutexLock joining(joinMu_);  // a join over the socket takes ids too
    for (HeldMount m : supervision_->resume) {
      const uint32_t id = m.mountpoint == options_.mountpoint ? 0 : nextMountId_++;
      if (id == 0) m.allowOther = options_.allowOther, m.order = options_.torchOrderText;
      last = serveMount(id, m, true);
      if (last.isOk()) {
        ++resumed;
      } else {
        spdlog::warn("restart: cannot resume {}: {}", m.mountpoint, last.message());
        if (supervision_->sendUnmounted) supervision_->sendUnmounted(m.mountpoint);
      }
    }
    if (resumed == 0) return last;
  } else {
    HeldMount first;
    first.mountpoint = options_.mountpoint;
    first.owner = owner0;
    first.allowOther = options_.allowOther;
    first.order = options_.torchOrderText;
    s = serveMount(0, first, false);
    if (!s.isOk()) return s;
  }
  if (options_.pushPageCache != MountOptions::PushMode::kOff) {
    pusher_ = std::make_unique<KernelPagePusher>(*mounts_->first(), *namespace_, *fileIndex_);
    prefetcher_->setPagePusher(pusher_.get());
  }
  return s;
}

std::string Daemon::namespaceFingerprint() const {
  return namespace_ ? fmt::format("{:016x}", namespace_->fingerprint()) : "";
}

}  // namespace epochfs::fusefs
