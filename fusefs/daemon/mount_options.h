// MountOptions: everything the command line (`--name value` or fstab-style
// `-o name=value`) can say, parsed and validated. Parsing may throw inside;
// the public functions return Result with a one-line reason.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/status.h"
#include "prefetch/prefetch_options.h"
#include "prefetch/torch_order_follower.h"

namespace epochfs::fusefs {

inline constexpr unsigned kDefaultFuseThreads = 16;  // --threads

// An s3://BUCKET[/PREFIX] source (fusefs/daemon/s3_mount_options.h parses it).
// No credential is ever held here: they are resolved apart (main.cc).
struct S3MountOptions {
  std::string bucket;
  std::string prefix;                 // "" or ending in '/'
  std::string endpoint;               // --s3-endpoint URL; "": the AWS regional endpoint
  std::string region;                 // --s3-region, else AWS_REGION/AWS_DEFAULT_REGION/us-east-1
  std::string addressing = "auto";    // --s3-addressing auto|path|virtual
  bool noSign = false;                // --s3-no-sign-request
  std::string credentialsFile;        // --s3-credentials-file (absolute)
  std::string profile;                // --s3-profile
  std::string caFile;                 // --s3-ca-file (absolute); "": the system CA store
  unsigned maxRequests = 32;          // --s3-max-requests: requests in flight
  unsigned readDeadlineSeconds = 30;  // --s3-read-deadline: all tries of one request
};

struct MountOptions {
  std::string source;  // absolute, canonical; or "s3://BUCKET/PREFIX" (then s3 is set)
  std::optional<S3MountOptions> s3;
  std::string mountpoint;  // absolute, canonical
  bool foreground = false;
  // A supervisor process keeps the mount and restarts a killed daemon
  // (docs/RELIABILITY.md "Recovering a mount"); false: --no-supervisor.
  bool supervise = true;
  // --own-daemon: never join a daemon that serves the same dataset, nor let
  // other mounts join this one (fusefs/daemon/daemon_registry.h).
  bool ownDaemon = false;
  uint64_t ramCacheBytes = 0;  // resolved (default: 25% of memoryLimitBytes)
  // The memory limit the defaults derive from (fusefs/daemon/memory_limit.h): the
  // daemon's cgroup limit or MemTotal, and the file that set it ("MemTotal").
  uint64_t memoryLimitBytes = 0;
  std::string memoryLimitSource;
  // --memory-watch on|off: under a cgroup limit, shrink the RAM tier before
  // the kernel OOM-kills the daemon (fusefs/daemon/memory_pressure_watcher.h).
  bool memoryWatch = true;
  // --huge-pages auto|on|off: chunk buffers carved from huge-page slabs
  // (cache/huge_page_slabs.h); off: page-aligned malloc. auto: on unless the
  // memory watcher runs, because an evicted chunk's memory stays in its slab
  // until the whole slab is free, so capping the tier under pressure would
  // not give memory back.
  enum class HugePages { kAuto, kOn, kOff };
  HugePages hugePages = HugePages::kAuto;
  std::string cacheDir;         // empty: no disk tier
  uint64_t diskCacheBytes = 0;  // resolved when cacheDir is set
  uint32_t chunkSize = 1 << 20;
  unsigned threads = 0;  // resolved (default: kDefaultFuseThreads)
  std::string logLevel = "warn";
  std::string logFile;
  unsigned revalidateSeconds = 0;  // 0: the dataset is immutable after the snapshot
  bool allowOther = false;
  bool nonempty = false;
  std::string adminSocket;  // empty: the default location
  // Members of this group may run mutating admin commands (docs/ADMIN.md).
  std::string adminGroup;         // as given (name or number); empty: none
  std::optional<gid_t> adminGid;  // resolved
  // --owner USER: who owns this mount (may steer its orders, warm it and
  // unmount it; docs/ADMIN.md), as given and resolved; unset: who mounts it.
  std::string ownerName;
  std::optional<uid_t> owner;
  int metricsPort = -1;  // --metrics-port: 127.0.0.1:PORT serves /metrics; -1 off, 0 any
  // Prefetch (docs/PREFETCH.md).
  uint32_t prefetchWindow = prefetch::PrefetchOptions{}.windowFiles;  // entries ahead
  uint64_t prefetchMemory = 256 << 20;  // prefetch bytes in flight (resolved: memoryDefaults())
  unsigned prefetchThreads = prefetch::PrefetchOptions{}.workers;  // concurrent reads
  // --push-page-cache off|on|sentinels: push prefetched files into the
  // kernel's page cache (docs/PREFETCH.md). on: opens reach the daemon and
  // carry the position; sentinels: opens stay zero-message, every 8th entry
  // is left un-pushed and its read carries the position.
  enum class PushMode { kOff, kOpens, kSentinels };
  PushMode pushPageCache = PushMode::kOff;
  uint64_t maxPlanEntries = 20000000;  // cap on one registered order
  unsigned injectSourceLatencyMs = 0;  // fault injection: delay every source read
  // Zero-change mode: --order torch-distributed:seed=S,world=W,ranks=R1+R2[,drop_last=1]
  bool torchOrder = false;
  prefetch::TorchOrderSpec torchOrderSpec;
  std::string torchOrderText;  // as given: a joining mount hands it to the daemon
  // Cluster (docs/CLUSTER.md): standalone unless one of peers/hostfile/slurm.
  std::string clusterPeers;       // --peers host:port,... (every member, same order everywhere)
  std::string clusterHostfile;    // --hostfile FILE (absolute)
  bool clusterSlurm = false;      // --slurm
  std::string clusterListen;      // --listen ADDR:PORT
  int clusterNodeId = -1;         // --node-id N
  uint16_t clusterPort = 7711;    // --cluster-port: entries without a port, --slurm
  unsigned replicas = 1;          // --replicas K
  std::string secretFile;         // --secret-file (absolute; 0600)
  bool peerMac = true;            // --peer-integrity=mac|checksum
  unsigned peerTimeoutMs = 2000;  // --peer-timeout
  // One walk per job (fusefs/daemon/namespace_exchange.h): the tree's fan-out,
  // and how long a member that never answered, or a walk that made no
  // progress, is waited for before the next member takes over.
  bool namespaceWalkEach = false;       // --namespace-walk each (default once)
  unsigned namespaceFanOut = 4;         // --namespace-fan-out
  unsigned namespaceStallSeconds = 30;  // --namespace-stall-timeout
  bool clustered() const {
    return !clusterPeers.empty() || !clusterHostfile.empty() || clusterSlurm;
  }
  bool versionRequested = false;  // -V/--version: main() prints the versions
  // The command line, for `epochctl status`.
  std::vector<std::string> given;
};

// Parses argv. `--help` prints, `--version` sets versionRequested; both set
// `exitNow`. Both steps below.
cache::Result<MountOptions> parseMountOptions(int argc, char** argv, bool* exitNow);

// Step 1, pure (no filesystem, no NSS; fuzzed by tests/fuzz): the command
// line (args[0] is the program name) parsed and checked; sizes given as a
// percentage are of `memoryBytes`. Paths are still as given.
struct MountCommandLine {
  MountOptions options;
  std::string diskCache;  // --disk-cache as given: a % needs the cache dir's filesystem
};
cache::Result<MountCommandLine> parseMountCommandLine(const std::vector<std::string>& args,
                                                      uint64_t memoryBytes, bool* exitNow);

// Step 2: makes the paths canonical, sizes the disk tier from its filesystem
// and resolves --admin-group.
cache::Result<MountOptions> resolveMountOptions(MountCommandLine cl);

// "seed=S,world=W,ranks=R1+R2[,drop_last=1]" after "torch-distributed:".
cache::Result<prefetch::TorchOrderSpec> parseTorchOrder(const std::string& text);

// "64M", "1.5G", "4096", "25%" (of `memoryBytes`). K/M/G/T are powers of 1024.
cache::Result<uint64_t> parseSize(const std::string& text, uint64_t memoryBytes);

// A group name or number to its gid.
cache::Result<gid_t> resolveGroup(const std::string& name);
// A user name or number to its uid.
cache::Result<uid_t> resolveUser(const std::string& name);

// The memory available to this process: min(MemTotal, the limits of its
// cgroup and its ancestors), see fusefs/daemon/memory_limit.h.
uint64_t availableMemoryBytes();

}  // namespace epochfs::fusefs
