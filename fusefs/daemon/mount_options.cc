#include "fusefs/daemon/mount_options.h"

#include <grp.h>
#include <pwd.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

#include "fusefs/daemon/memory_limit.h"
#include "fusefs/daemon/s3_mount_options.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

// Generic options mount(8) and fstab pass; accepted and ignored (the mount is
// always ro,nosuid,nodev).
bool isGenericMountOption(const std::string& name) {
  static const std::set<std::string> kGeneric = {
      "rw",    "ro",     "suid",  "nosuid",  "dev",      "nodev",  "exec",     "noexec",
      "auto",  "noauto", "user",  "nouser",  "users",    "owner",  "defaults", "_netdev",
      "async", "sync",   "atime", "noatime", "relatime", "nofail", "diratime", "nodiratime"};
  return kGeneric.count(name) > 0 || name.rfind("x-", 0) == 0 || name.rfind("comment=", 0) == 0;
}

// Turns `-o a=b,c` into `--a b --c`, so both spellings go through one parser.
Result<std::vector<std::string>> expandDashO(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  const size_t argc = argv.size();
  if (argc == 0) return Status::invalidArgument("empty command line");
  out.emplace_back(argv[0]);
  for (size_t i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string list;
    if (arg == "-o") {
      if (i + 1 >= argc) return Status::invalidArgument("-o needs a value");
      list = argv[++i];
    } else if (arg.rfind("-o", 0) == 0 && arg.size() > 2 && arg[2] != '-') {
      list = arg.substr(2);
    } else {
      out.push_back(arg);
      continue;
    }
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      std::string item =
          list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (item.empty() || isGenericMountOption(item)) continue;
      size_t eq = item.find('=');
      std::string name = item.substr(0, eq);
      for (char& c : name) {
        if (c == '_') c = '-';
      }
      out.push_back("--" + name);
      if (eq != std::string::npos) out.push_back(item.substr(eq + 1));
    }
  }
  return out;
}

std::string canonicalDir(const std::string& path, const char* what) {
  std::error_code ec;
  auto p = std::filesystem::canonical(path, ec);
  if (ec) throw std::runtime_error(std::string(what) + " " + path + ": " + ec.message());
  if (!std::filesystem::is_directory(p, ec)) {
    throw std::runtime_error(std::string(what) + " " + path + " is not a directory");
  }
  return p.string();
}

}  // namespace

namespace {

// `name`'s id from the user or group database (`byName`), else `name` read
// as a number: an id need not have an entry.
template <typename Id>
Result<Id> resolveId(
    const std::string& name, const char* what,
    const std::function<std::optional<Id>(const char*, std::vector<char>&)>& byName) {
  std::vector<char> buf(16384);
  if (auto id = byName(name.c_str(), buf)) return *id;
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
      name.size() < 10) {
    return static_cast<Id>(std::stoul(name));
  }
  return Status::invalidArgument(std::string("no such ") + what + " '" + name + "'");
}

}  // namespace

Result<gid_t> resolveGroup(const std::string& name) {
  return resolveId<gid_t>(name, "group", [](const char* n, std::vector<char>& buf) {
    struct group gr;
    struct group* found = nullptr;
    const bool ok = getgrnam_r(n, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr;
    return ok ? std::optional<gid_t>(found->gr_gid) : std::nullopt;
  });
}

Result<uid_t> resolveUser(const std::string& name) {
  return resolveId<uid_t>(name, "user", [](const char* n, std::vector<char>& buf) {
    struct passwd pw;
    struct passwd* found = nullptr;
    const bool ok = getpwnam_r(n, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr;
    return ok ? std::optional<uid_t>(found->pw_uid) : std::nullopt;
  });
}

uint64_t availableMemoryBytes() { return detectMemoryLimit().effectiveBytes(); }

Result<uint64_t> parseSize(const std::string& text, uint64_t memoryBytes) {
  if (text.empty()) return Status::invalidArgument("empty size");
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v) || v < 0) {
    return Status::invalidArgument("malformed size '" + text + "'");
  }
  std::string suffix(end);
  double mult = 1;
  if (suffix.empty() || suffix == "B") {
    mult = 1;
  } else if (suffix == "%") {
    if (v > 100) return Status::invalidArgument("percentage over 100 in '" + text + "'");
    return static_cast<uint64_t>(static_cast<double>(memoryBytes) * v / 100.0);
  } else {
    const std::string units = "KMGT";
    size_t u = units.find(static_cast<char>(std::toupper(suffix[0])));
    bool tail = suffix.size() == 1 || suffix.substr(1) == "B" || suffix.substr(1) == "iB";
    if (u == std::string::npos || !tail) {
      return Status::invalidArgument("malformed size '" + text + "' (use K, M, G, T or %)");
    }
    mult = std::pow(1024.0, static_cast<double>(u + 1));
  }
  double bytes = v * mult;
  if (bytes > 9.0e18) return Status::invalidArgument("size too large: '" + text + "'");
  return static_cast<uint64_t>(bytes);
}

Result<prefetch::TorchOrderSpec> parseTorchOrder(const std::string& text) {
  const std::string kPrefix = "torch-distributed";
  if (text.rfind(kPrefix, 0) != 0) {
    return Status::invalidArgument("unknown order '" + text +
                                   "' (supported: torch-distributed:...)");
  }
  prefetch::TorchOrderSpec spec;
  std::string rest = text.substr(kPrefix.size());
  if (!rest.empty() && rest[0] == ':') rest.erase(0, 1);
  bool ranksGiven = false;
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t comma = std::min(rest.find(',', pos), rest.size());
    std::string item = rest.substr(pos, comma - pos);
    pos = comma + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Status::invalidArgument("expected key=value, got '" + item + "'");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    try {
      size_t used = 0;
      if (key == "seed") {
        spec.seed = std::stoull(value, &used);
      } else if (key == "world") {
        spec.world = std::stoi(value, &used);
      } else if (key == "drop_last") {
        spec.dropLast = std::stoi(value, &used) != 0;
      } else if (key == "ranks") {
        spec.ranks.clear();
        ranksGiven = true;
        size_t p = 0;
        while (p <= value.size()) {
          size_t plus = std::min(value.find('+', p), value.size());
          size_t u = 0;
          spec.ranks.push_back(std::stoi(value.substr(p, plus - p), &u));
          if (u != plus - p) throw std::invalid_argument("rank");
          p = plus + 1;
        }
        used = value.size();
      } else {
        return Status::invalidArgument("unknown key '" + key + "'");
      }
      if (used != value.size()) throw std::invalid_argument(key);
    } catch (const std::exception&) {
      return Status::invalidArgument("malformed value for '" + key + "': '" + value + "'");
    }
  }
  if (spec.world < 1) return Status::invalidArgument("world must be >= 1");
  if (!ranksGiven) spec.ranks = {0};
  for (int r : spec.ranks) {
    if (r < 0 || r >= spec.world) return Status::invalidArgument("rank out of range [0, world)");
  }
  return spec;
}

Result<MountOptions> parseMountOptions(int argc, char** argv, bool* exitNow) {
  // The defaults derive from the daemon's memory limit (cgroup or MemTotal).
  const MemoryLimit limit = detectMemoryLimit();
  auto cl = parseMountCommandLine(std::vector<std::string>(argv, argv + argc),
                                  limit.effectiveBytes(), exitNow);
  if (!cl.isOk()) return cl.status();
  cl->options.memoryLimitSource = std::string(limit.effectiveSource()) == "cgroup"
                                      ? limit.cgroupLimitFile
                                      : std::string("MemTotal");
  if (*exitNow) return std::move(cl->options);
  return resolveMountOptions(std::move(cl).value());
}

Result<MountCommandLine> parseMountCommandLine(const std::vector<std::string>& argv,
                                               uint64_t memoryBytes, bool* exitNow) {
  *exitNow = false;
  auto expanded = expandDashO(argv);
  if (!expanded.isOk()) return expanded.status();
  std::vector<std::string>& args = *expanded;

  MountCommandLine cl;
  MountOptions& o = cl.options;
  std::string ramCache, diskCache, chunkSize = "1M";
  CLI::App app{"epochfs: a read-only FUSE cache for deep-learning datasets", "epochfs"};
  app.add_option("source", o.source, "Dataset directory, or s3://BUCKET[/PREFIX]")->required();
  app.add_option("mountpoint", o.mountpoint, "Where to mount it")->required();
  app.add_flag("-f,--foreground", o.foreground, "Stay in the foreground");
  bool noSupervisor = false;
  app.add_flag("--no-supervisor", noSupervisor,
               "One process: no restart of a killed daemon, no upgrade in place");
  app.add_flag("--own-daemon", o.ownDaemon,
               "Never share a daemon with other mounts of the same dataset");
  app.add_option("--ram-cache", ramCache,
                 "RAM tier size (default 25% of the memory limit: cgroup limit or MemTotal)");
  app.add_option("--cache-dir", o.cacheDir, "Directory for the disk tier (default: none)");
  app.add_option("--disk-cache", diskCache, "Disk tier size (default 50% of free space)");
  app.add_option("--chunk-size", chunkSize, "Chunk size, 4K..64M (default 1M)");
  app.add_option("--threads", o.threads,
                 "FUSE worker threads (default " + std::to_string(kDefaultFuseThreads) + ")")
      ->check(CLI::Range(1, 1024));
  app.add_option("--log-level", o.logLevel, "trace|debug|info|warn|error|off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_option("--log-file", o.logFile, "Log file (default: syslog; stderr with -f)");
  app.add_option("--revalidate", o.revalidateSeconds,
                 "Re-check source files older than SECONDS (default 0: immutable)")
      ->check(CLI::Range(0, 86400 * 365));
  app.add_option("--admin-socket", o.adminSocket, "Admin socket path");
  app.add_option("--owner", o.ownerName,
                 "User who owns this mount: may register its orders, warm and unmount it "
                 "(default: who mounts it)");
  app.add_option("--admin-group", o.adminGroup,
                 "Group whose members may run mutating epochctl commands (warm, evict, ...)");
  app.add_option("--metrics-port", o.metricsPort,
                 "Serve Prometheus /metrics on 127.0.0.1:PORT (0: any free port)")
      ->check(CLI::Range(0, 65535));
  std::string prefetchMemory;  // default: memoryDefaults()
  app.add_option("--prefetch-window", o.prefetchWindow,
                 "Plan entries to prefetch ahead (default " +
                     std::to_string(prefetch::PrefetchOptions{}.windowFiles) + ")")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--prefetch-memory", prefetchMemory,
                 "Prefetch bytes in flight (default 1/16 of the memory limit, 4M..256M)");
  app.add_option("--prefetch-threads", o.prefetchThreads,
                 "Concurrent prefetch reads (default " +
                     std::to_string(prefetch::PrefetchOptions{}.workers) + ")")
      ->check(CLI::Range(1, 1024));
  std::string memoryWatch = "on";
  app.add_option("--memory-watch", memoryWatch,
                 "Under a cgroup memory limit, shrink the RAM tier when the cgroup nears it "
                 "(on|off, default on)")
      ->check(CLI::IsMember({"on", "off"}));
  std::string hugePages = "auto";
  app.add_option("--huge-pages", hugePages,
                 "Carve chunk buffers from 2 MiB slabs backed by transparent huge pages "
                 "(auto|on|off, default auto: on unless the memory watcher watches a cgroup "
                 "limit)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  std::string pushPageCache = "off";
  app.add_option(
         "--push-page-cache", pushPageCache,
         "Push prefetched files into the kernel's page cache: off|on|sentinels (default off)")
      ->check(CLI::IsMember({"on", "off", "sentinels"}));
  app.add_option("--max-plan-entries", o.maxPlanEntries, "Cap on a registered order (default 20M)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--inject-source-latency", o.injectSourceLatencyMs,
                 "Testing: add MS milliseconds to every source read")
      ->check(CLI::Range(0, 60000));
  std::string order;
  app.add_option("--order", order,
                 "Follow torch's sampler order: torch-distributed:seed=S,world=W,ranks=R1+R2");
  std::string peerIntegrity = "mac";
  std::string namespaceWalk = "once";
  app.add_option("--peers", o.clusterPeers,
                 "Cluster members host:port,... (same list on every node)");
  app.add_option("--hostfile", o.clusterHostfile, "Cluster members, one host[:port] per line");
  app.add_flag("--slurm", o.clusterSlurm, "Cluster members from SLURM_JOB_NODELIST/SLURM_NODEID");
  app.add_option("--listen", o.clusterListen,
                 "Peer address ADDR:PORT (default: this node's entry)");
  app.add_option("--node-id", o.clusterNodeId, "This node's line in the member list")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--cluster-port", o.clusterPort,
                 "Port of members given without one (default 7711)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--replicas", o.replicas, "Owners per file (default 1)")->check(CLI::Range(1, 16));
  app.add_option("--secret-file", o.secretFile, "The job's shared secret (mode 0600)");
  app.add_option("--peer-integrity", peerIntegrity, "mac (default) or checksum (trusted fabric)")
      ->check(CLI::IsMember({"mac", "checksum"}));
  app.add_option("--peer-timeout", o.peerTimeoutMs, "Peer request deadline in ms (default 2000)")
      ->check(CLI::Range(10, 600000));
  app.add_option("--namespace-walk", namespaceWalk,
                 "once (default: one member walks, the others receive it) or each "
                 "(every member walks its own view of the source)")
      ->check(CLI::IsMember({"once", "each"}));
  app.add_option("--namespace-fan-out", o.namespaceFanOut,
                 "Members each member sends the namespace on to (default 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--namespace-stall-timeout", o.namespaceStallSeconds,
                 "Seconds a silent walker is waited for before the next takes over (default 30)")
      ->check(CLI::Range(1, 86400));
  app.add_flag("--allow-other", o.allowOther, "Let other users read the mount");
  app.add_flag("--nonempty", o.nonempty, "Allow mounting over a non-empty directory");
  S3CommandLine s3;
  addS3Options(app, s3);
  // main() prints the versions (fusefs/version_info.h): this parser stays
  // free of libfuse and UCX (the fuzzer links it alone).
  app.set_version_flag("-V,--version", std::string(),
                       "Print the versions of epochfs, libfuse and UCX, and exit");

  std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    *exitNow = true;
    return cl;
  } catch (const CLI::CallForVersion& e) {
    o.versionRequested = true;
    *exitNow = true;
    return cl;
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    return Status::invalidArgument(msg.empty() ? "bad command line" : msg);
  }
  o.given.assign(args.begin() + 1, args.end());
  o.supervise = !noSupervisor;
  if (o.source.empty() || o.mountpoint.empty()) {  // found by tests/fuzz (`epochfs "" /mnt`)
    return Status::invalidArgument("the source and the mountpoint must not be empty");
  }

  if (Status s = finishS3Options(o, s3); !s.isOk()) return s;
  if (o.s3 && o.revalidateSeconds > 0) {
    return Status::invalidArgument(
        "--revalidate is not supported for an s3:// source (use epochctl refresh)");
  }
  o.peerMac = peerIntegrity == "mac";
  o.namespaceWalkEach = namespaceWalk == "each";
  o.memoryWatch = memoryWatch == "on";
  o.hugePages = hugePages == "on"    ? MountOptions::HugePages::kOn
                : hugePages == "off" ? MountOptions::HugePages::kOff
                                     : MountOptions::HugePages::kAuto;
  o.pushPageCache = pushPageCache == "on"          ? MountOptions::PushMode::kOpens
                    : pushPageCache == "sentinels" ? MountOptions::PushMode::kSentinels
                                                   : MountOptions::PushMode::kOff;
  if (int(!o.clusterPeers.empty()) + int(!o.clusterHostfile.empty()) + int(o.clusterSlurm) > 1) {
    return Status::invalidArgument("give only one of --peers, --hostfile, --slurm");
  }
  if (o.clustered() && o.secretFile.empty()) {
    return Status::invalidArgument("a cluster needs --secret-file (a 0600 file shared by the job)");
  }
  if (!o.clustered() && (!o.clusterListen.empty() || !o.secretFile.empty())) {
    return Status::invalidArgument("--listen/--secret-file need --peers, --hostfile or --slurm");
  }

  const uint64_t mem = memoryBytes;
  o.memoryLimitBytes = mem;
  const MemoryDefaults defaults = memoryDefaults(mem);
  auto cs = parseSize(chunkSize, mem);
  if (!cs.isOk()) return Status::invalidArgument("--chunk-size: " + cs.status().message());
  if (*cs < 4096 || *cs > (64u << 20) || (*cs & (*cs - 1)) != 0) {
    return Status::invalidArgument("--chunk-size must be a power of two from 4K to 64M");
  }
  o.chunkSize = static_cast<uint32_t>(*cs);

  if (ramCache.empty()) {
    o.ramCacheBytes = defaults.ramCacheBytes;
  } else {
    auto r = parseSize(ramCache, mem);
    if (!r.isOk()) return Status::invalidArgument("--ram-cache: " + r.status().message());
    o.ramCacheBytes = *r;
  }

  if (!diskCache.empty() && o.cacheDir.empty()) {
    return Status::invalidArgument("--disk-cache needs --cache-dir");
  }
  cl.diskCache = diskCache;
  if (!order.empty()) {
    auto spec = parseTorchOrder(order);
    if (!spec.isOk()) return Status::invalidArgument("--order: " + spec.status().message());
    o.torchOrder = true;
    o.torchOrderSpec = *spec;
    o.torchOrderText = order;
  }
  if (prefetchMemory.empty()) {
    o.prefetchMemory = defaults.prefetchBytes;
  } else {
    auto pm = parseSize(prefetchMemory, mem);
    if (!pm.isOk()) return Status::invalidArgument("--prefetch-memory: " + pm.status().message());
    o.prefetchMemory = *pm;
  }
  if (o.threads == 0) o.threads = kDefaultFuseThreads;
  return cl;
}

Result<MountOptions> resolveMountOptions(MountCommandLine cl) {
  MountOptions& o = cl.options;
  try {
    if (o.s3) {
      resolveS3Options(*o.s3);
    } else {
      o.source = canonicalDir(o.source, "source");
    }
    // A restarted worker (fusefs/daemon/supervisor.h) is given the canonical path:
    // stat() on its own mount would wait for itself.
    const char* resumed = std::getenv("EPOCHFS_RESUME_MOUNTPOINT");
    o.mountpoint = resumed != nullptr ? resumed : canonicalDir(o.mountpoint, "mountpoint");
    if (!o.cacheDir.empty()) o.cacheDir = canonicalDir(o.cacheDir, "cache dir");
  } catch (const std::exception& e) {
    return Status::invalidArgument(e.what());
  }
  // The daemon changes directory when it detaches: keep paths absolute.
  for (std::string* p : {&o.clusterHostfile, &o.secretFile}) {
    if (!p->empty()) *p = std::filesystem::absolute(*p).string();
  }
  if (o.mountpoint == o.source) {
    return Status::invalidArgument("mountpoint and source are the same directory");
  }
  if (!o.cacheDir.empty()) {
    struct statvfs vfs;
    if (statvfs(o.cacheDir.c_str(), &vfs) != 0) {
      return Status::invalidArgument("cannot stat the cache dir's filesystem");
    }
    const uint64_t fsSize = uint64_t{vfs.f_blocks} * vfs.f_frsize;
    const uint64_t fsFree = uint64_t{vfs.f_bavail} * vfs.f_frsize;
    // Never plan to leave less than 10% of the filesystem free.
    const uint64_t keepFree = fsSize / 10;
    const uint64_t usable = fsFree > keepFree ? fsFree - keepFree : 0;
    if (cl.diskCache.empty()) {
      o.diskCacheBytes = std::min(fsFree / 2, usable);
    } else {
      auto r = parseSize(cl.diskCache, fsSize);
      if (!r.isOk()) return Status::invalidArgument("--disk-cache: " + r.status().message());
      o.diskCacheBytes = *r;
    }
  }
  if (!o.adminGroup.empty()) {
    auto g = resolveGroup(o.adminGroup);
    if (!g.isOk()) return Status::invalidArgument("--admin-group: " + g.status().message());
    o.adminGid = *g;
  }
  if (!o.ownerName.empty()) {
    auto u = resolveUser(o.ownerName);
    if (!u.isOk()) return Status::invalidArgument("--owner: " + u.status().message());
    o.owner = *u;
  }
  return std::move(cl.options);
}

}  // namespace epochfs::fusefs
