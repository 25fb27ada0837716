#include "fusefs/daemon.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "cache/disk_tier.h"
#include "cache/ram_tier.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;

namespace {

// Decodes the octal escapes of /proc/self/mountinfo paths.
std::string unescapeMountPath(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

json tierJson(const cache::TierUsage& u, const cache::TierCounters& hits) {
  return {{"hit_chunks", hits.chunks.load()}, {"hit_bytes", hits.bytes.load()},
          {"used_bytes", u.bytesUsed},        {"capacity_bytes", u.capacityBytes},
          {"chunks", u.chunks},               {"evictions", u.evictions},
          {"corruptions", u.corruptions}};
}

}  // namespace

Status checkMountable(const MountOptions& o) {
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    return Status::unavailable("/dev/fuse is not available (is the fuse module loaded?)");
  }
  std::ifstream mi("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mi, line)) {
    // Field 5 is the mount point.
    size_t pos = 0;
    for (int f = 0; f < 4 && pos != std::string::npos; ++f) pos = line.find(' ', pos + 1);
    if (pos == std::string::npos) continue;
    size_t end = line.find(' ', pos + 1);
    if (unescapeMountPath(line.substr(pos + 1, end - pos - 1)) == o.mountpoint) {
      return Status::unavailable("mountpoint " + o.mountpoint + " is already mounted");
    }
  }
  if (!o.nonempty) {
    DIR* d = opendir(o.mountpoint.c_str());
    if (d == nullptr) return Status::fromErrno(errno, "cannot open mountpoint " + o.mountpoint);
    bool empty = true;
    while (struct dirent* de = readdir(d)) {
      if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) empty = false;
    }
    closedir(d);
    if (!empty) {
      return Status::invalidArgument("mountpoint " + o.mountpoint +
                                     " is not empty (use -o nonempty to mount over it)");
    }
  }
  return Status::ok();
}

Daemon::Daemon(MountOptions options) : options_(std::move(options)) {}

Daemon::~Daemon() {
  admin_.stop();
  fuse_.reset();  // unmounts if still mounted
}

Status Daemon::openTiers() {
  ram_ = std::make_unique<cache::RamTier>(options_.ramCacheBytes);
  if (options_.cacheDir.empty()) return Status::ok();
  char sub[64];
  snprintf(sub, sizeof sub, "/epochfs-%016llx", static_cast<unsigned long long>(datasetId_));
  cache::DiskTierOptions d;
  d.dir = options_.cacheDir + sub;
  d.capacityBytes = options_.diskCacheBytes;
  d.datasetId = datasetId_;
  auto disk = cache::DiskTier::open(d);
  if (!disk.isOk()) return disk.status();
  disk_ = std::move(disk).value();
  return Status::ok();
}

Status Daemon::start() {
  startedAt_ = std::chrono::steady_clock::now();
  datasetId_ = cache::datasetIdForPath(options_.source);
  auto src = cache::PosixSource::open(options_.source);
  if (!src.isOk()) return src.status();
  source_ = std::move(src).value();

  const auto t0 = std::chrono::steady_clock::now();
  auto ns = DatasetNamespace::snapshot(source_->rootFd(), 16);
  if (!ns.isOk()) return ns.status();
  namespace_ = std::make_unique<DatasetNamespace>(std::move(ns).value());
  snapshotSeconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("snapshot: {} files, {} dirs, {} bytes in {:.2f}s", namespace_->fileCount(),
               namespace_->dirCount(), namespace_->totalBytes(), snapshotSeconds_);

  Status s = openTiers();
  if (!s.isOk()) return s;
  cache::ChunkCache::Options co;
  co.datasetId = datasetId_;
  co.chunkSize = options_.chunkSize;
  cache_ = std::make_unique<cache::ChunkCache>(co, *source_, *ram_, disk_.get());

  std::string socketPath = options_.adminSocket;
  if (socketPath.empty()) {
    auto p = AdminServer::defaultPath(options_.mountpoint);
    if (!p.isOk()) return p.status();
    socketPath = *p;
  }
  admin_.handle(admin::kCmdStatus, [this](const json&, const AdminCaller&) { return statusJson(); });
  admin_.handle(admin::kCmdStats, [this](const json&, const AdminCaller&) { return statsJson(); });
  s = admin_.start(socketPath);
  if (!s.isOk()) return s;

  FuseServer::Config fc;
  fc.revalidateSeconds = options_.revalidateSeconds;
  fc.threads = options_.threads;
  fc.allowOther = options_.allowOther;
  fc.fsname = "epochfs";
  fc.adminSocketPath = socketPath;
  fuse_ = std::make_unique<FuseServer>(fc, *namespace_, *cache_, *source_);
  return fuse_->mount(options_.mountpoint);
}

int Daemon::run() {
  int rc = fuse_->loop();
  admin_.stop();
  fuse_->unmount();
  return rc == 0 ? 0 : 1;
}

json Daemon::statusJson() const {
  json tiers = {{"ram", {{"used_bytes", ram_->usage().bytesUsed},
                         {"capacity_bytes", ram_->usage().capacityBytes}}}};
  if (disk_) {
    tiers["disk"] = {{"used_bytes", disk_->usage().bytesUsed},
                     {"capacity_bytes", disk_->usage().capacityBytes},
                     {"dir", options_.cacheDir}};
  }
  return {
      {"version", "0.1.0"},
      {"pid", getpid()},
      {"source", options_.source},
      {"mountpoint", options_.mountpoint},
      {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - startedAt_)
                       .count()},
      {"dataset", {{"files", namespace_->fileCount()},
                   {"dirs", namespace_->dirCount()},
                   {"bytes", namespace_->totalBytes()},
                   {"snapshot_s", snapshotSeconds_}}},
      {"options", {{"ram_cache", options_.ramCacheBytes},
                   {"cache_dir", options_.cacheDir},
                   {"disk_cache", options_.diskCacheBytes},
                   {"chunk_size", options_.chunkSize},
                   {"threads", options_.threads},
                   {"revalidate", options_.revalidateSeconds},
                   {"allow_other", options_.allowOther},
                   {"command_line", options_.given}}},
      {"tiers", tiers},
  };
}

json Daemon::statsJson() const {
  const cache::CacheStats& st = cache_->stats();
  json tiers = {{"ram", tierJson(ram_->usage(), st.ram)}};
  if (disk_) tiers["disk"] = tierJson(disk_->usage(), st.disk);
  tiers["source"] = {{"chunks", st.source.chunks.load()},
                     {"bytes", st.source.bytes.load()},
                     {"read_chunks", st.sourceReads.chunks.load()},
                     {"read_bytes", st.sourceReads.bytes.load()},
                     {"errors", st.sourceErrors.load()},
                     {"latency_us",
                      {{"p50", st.sourceLatency.quantileMicros(0.5)},
                       {"p90", st.sourceLatency.quantileMicros(0.9)},
                       {"p99", st.sourceLatency.quantileMicros(0.99)}}}};
  return {{"read_requests", st.readRequests.load()},
          {"read_bytes", st.readBytes.load()},
          {"coalesced", st.coalesced.load()},
          {"source_errors", st.sourceErrors.load()},
          {"tiers", tiers}};
}

}  // namespace epochfs::fusefs
