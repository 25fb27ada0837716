// Daemon: where the namespace comes from (a walk, a listing, or the
// supervisor's hand-over) and where it goes after a refresh (the file index,
// the kernel's caches, the supervisor). daemon.h says the threading.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <utility>

#include "fusefs/daemon/daemon.h"
#include "fusefs/daemon/namespace_handover.h"

namespace epochfs::fusefs {

using cache::Status;

Status Daemon::openSource() {
  if (options_.s3) {
    auto ds = S3Dataset::open(*options_.s3, std::move(s3Credentials_), s3CredentialsOrigin_,
                              s3CredentialsFile_);
    s3Credentials_.reset();
    if (!ds.isOk()) return ds.status();
    s3_ = std::move(ds).value();
    source_ = &s3_->source();
    datasetId_ = cache::datasetIdForPath(s3_->datasetKey());
    return Status::ok();
  }
  datasetId_ = cache::datasetIdForPath(options_.source);
  auto src = cache::PosixSource::open(options_.source);
  if (!src.isOk()) return src.status();
  posix_ = std::move(src).value();
  source_ = posix_.get();
  return Status::ok();
}

namespace {

// TEST-ONLY: a pause before each directory of the walk (a walk slow enough
// to kill mid-way); unset in real use.
std::chrono::milliseconds testWalkDelay() {
  const char* v = getenv("EPOCHFS_TEST_WALK_DELAY_MS");
  return std::chrono::milliseconds(v != nullptr ? std::strtoul(v, nullptr, 10) : 0);
}

}  // namespace

cache::Result<DatasetNamespace> Daemon::snapshotSource(std::atomic<uint64_t>* progress) {
  if (s3_) return s3_->snapshot();
  DatasetNamespace::WalkOptions walk;
  walk.progress = progress;
  walk.directoryDelay = testWalkDelay();
  return DatasetNamespace::snapshot(posix_->rootFd(), walk);
}

void Daemon::namespaceLoaded() {
  if (!cluster_) return;
  // Placement bounds each node's share by its capacity over the same list of
  // files on every node (transport/placement_table.h): the mount's snapshot;
  // a file a refresh added has owners by rendezvous.
  std::vector<transport::FileBytes> files;
  files.reserve(namespace_->fileCount());
  for (DatasetNamespace::Ino ino = 1; ino <= namespace_->nodeCount(); ++ino) {
    if (!S_ISREG(namespace_->attr(ino).mode)) continue;
    files.push_back({namespace_->fileId(ino), namespace_->attr(ino).size});
  }
  cluster_->setFiles(std::move(files));
  namespaceReady_.store(true, std::memory_order_release);
  // Serve the first reads with the job's placement, not plain rendezvous
  // (other members, ready, would name other owners: a file read twice).
  // The table takes 0.5 s at 1 M files x 1,024 members, 4 s at 10 M.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!cluster_->fit().ready && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!cluster_->fit().ready) spdlog::warn("cluster: no placement table after 30 s; mounting");
}

cache::Result<DatasetNamespace> Daemon::loadNamespace() {
  if (supervision_ && supervision_->namespaceFd >= 0) {
    const int fd = std::exchange(supervision_->namespaceFd, -1);
    // The same sealed image serves members still to come (adopt closes fd).
    const int kept = exchange_ ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    auto ns = NamespaceHandover::adopt(fd, supervision_->expectedFingerprint, s3_.get());
    if (ns.isOk()) {
      namespaceSource_ = "handed over";
      if (kept >= 0) {
        Status held = exchange_->holdSealed(kept, ns->fingerprint());
        if (!held.isOk()) spdlog::warn("cannot serve the namespace to peers: {}", held.message());
      }
      return ns;
    }
    if (kept >= 0) close(kept);
    spdlog::warn("restart: the namespace handed over is not usable ({}); {} the source again",
                 ns.status().message(), s3_ ? "listing" : "walking");
  } else if (supervision_ && !supervision_->resume.empty()) {
    spdlog::warn("restart: no namespace handed over; {} the source again",
                 s3_ ? "listing" : "walking");
  }
  if (!s3_ && !options_.cacheDir.empty()) {
    namespaceStore_.emplace(datasetCacheDir());
    // A restart resumes the kernel's node ids: only the hand-over may serve
    // it. A cluster's nodes must place one snapshot: the job's one walk.
    if ((!supervision_ || supervision_->resume.empty()) && !options_.clustered()) {
      int64_t keptAt = 0;
      auto kept = namespaceStore_->load(&keptAt);
      if (kept.isOk()) {
        namespaceSource_ = "kept on disk";
        validateFirstUse_ = true;
        spdlog::info(
            "namespace kept in {} (written {}s ago): no walk; entries are checked at "
            "their first use, `epochctl refresh` adds what is new",
            namespaceStore_->path(), std::max<int64_t>(0, time(nullptr) - keptAt));
        return kept;
      }
      if (kept.status().code() != cache::Status::Code::kNotFound) {
        spdlog::warn("{} is not usable ({}); walking the source", namespaceStore_->path(),
                     kept.status().message());
      }
    }
  }
  if (exchange_) {
    // One walk per job: the lowest member walks; the others get its image.
    auto ns = exchange_->obtain(
        [this](std::atomic<uint64_t>* progress) { return snapshotSource(progress); },
        [this](const DatasetNamespace& n) { return NamespaceHandover::publish(n, s3_.get()); },
        [this](int fd, const std::string& fingerprint) {
          return NamespaceHandover::adopt(fd, fingerprint, s3_.get());
        });
    const auto origin = exchange_->origin();
    namespaceSource_ = !origin.walked ? "peer" : s3_ ? "listing" : "walk";
    if (ns.isOk() && !origin.walked) {
      spdlog::info("namespace: received from member {} (walked by member {}), {} bytes, in {:.2f}s",
                   origin.parent, origin.walker, origin.imageBytes, origin.waitedSeconds);
    }
    return ns;
  }
  namespaceSource_ = s3_ ? "listing" : "walk";
  return snapshotSource();
}

void Daemon::keepNamespace() {
  if (!namespaceStore_ || !namespace_) return;
  cache::MutexLock lock(publishMu_);
  Status s = namespaceStore_->save(*namespace_);
  if (!s.isOk()) spdlog::warn("cannot keep the namespace: {}", s.message());
}

void Daemon::publishNamespace() {
  if (!supervision_ || !supervision_->sendNamespace || !namespace_) return;
  cache::MutexLock lock(publishMu_);
  // Until a refresh changes it, the namespace is the image the exchange holds
  // (walked here or received): handed over as it is, not encoded twice.
  if (exchange_ && !refreshedSinceStart_) {
    if (const int held = exchange_->sealedImage(); held >= 0) {
      supervision_->sendNamespace(held);
      close(held);
      return;
    }
  }
  auto fd = NamespaceHandover::publish(*namespace_, s3_.get());
  if (!fd.isOk()) {
    spdlog::warn("cannot hand the namespace to the supervisor: {}", fd.status().message());
    return;
  }
  supervision_->sendNamespace(*fd);
  close(*fd);
}

void Daemon::namespaceRefreshed(const RefreshReport& r) {
  refreshedSinceStart_ = true;
  if (fileIndex_) fileIndex_->catchUp();  // files a refresh added
  // Every mount's kernel holds its own entries and pages.
  mounts_->forEach([&](uint32_t, const std::string&, FuseServer& f) {
    f.dropKernelEntries(r.goneEntries, r.staleInodes);
  });
  publishNamespace();
  keepNamespace();
}

}  // namespace epochfs::fusefs
