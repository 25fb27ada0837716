#include "fusefs/fuse_server.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "cache/steady_clock.h"
#include "fusefs/admin_protocol.h"
#include "fusefs/fuse_init_replay.h"
#include "fusefs/fuse_ops_table.h"
#include "fusefs/to_errno.h"

namespace epochfs::fusefs {

namespace {

constexpr double kImmutableTimeout = 365.0 * 86400;  // the snapshot never changes
constexpr size_t kMaxReadBytes = 1 << 20;            // the kernel's max read (256 pages)

// requestStop() wakes the loop's thread (asleep in sem_wait until a worker
// ends) with this signal; its handler does nothing, and it has no SA_RESTART,
// so the wait returns and the loop sees the session has exited. The daemon's
// stop signals themselves are read elsewhere (fusefs/daemon/stop_signals.h).
constexpr int kWakeSignal = SIGUSR1;
void onWakeSignal(int) {}

}  // namespace

FuseServer::FuseServer(const Config& config, DatasetNamespace& ns, cache::ChunkCache& cache,
                       cache::Source& source, prefetch::Prefetcher* prefetcher)
    : config_(config), ns_(ns), cache_(cache), source_(source), prefetcher_(prefetcher) {
  if (prefetcher_ != nullptr && config_.readAheadChunks > 0) {
    lastChunk_ = std::make_unique<PerInode<uint32_t>>();
    readAheadTo_ = std::make_unique<PerInode<uint32_t>>();
  }
  if (config_.revalidateSeconds > 0 || config_.validateFirstUse) {
    checkedAt_ = std::make_unique<PerInode<int64_t>>();
    stalePages_ = std::make_unique<PerInode<bool>>();
    // The snapshot's entries were just seen (unless it was kept from an
    // earlier mount); one a refresh adds is checked at its first use.
    const int64_t now = cache::steadyNowNs();
    if (!config_.validateFirstUse) {
      for (size_t i = 0; i <= ns_.nodeCount(); ++i) checkedAt_->at(i).store(now);
    }
    invalThread_ = std::thread([this] { invalidationLoop(); });
  }
}

FuseServer::~FuseServer() {
  {
    cache::MutexLock lock(invalMu_);
    stopping_ = true;
  }
  invalCv_.notifyAll();
  if (invalThread_.joinable()) invalThread_.join();
  unmount();
  if (session_ != nullptr) fuse_session_destroy(session_);
}

cache::Status FuseServer::mount(const std::string& mountpoint) {
  std::string opts = "ro,nosuid,nodev,fsname=" + config_.fsname + ",subtype=epochfs";
  if (config_.allowOther) opts += ",allow_other,default_permissions";
  std::vector<std::string> argvStore = {"epochfs", "-o", opts};
  std::vector<char*> argv;
  for (auto& s : argvStore) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  session_ = fuse_session_new(&args, &fuseServerOps(), sizeof(fuse_lowlevel_ops), this);
  fuse_opt_free_args(&args);  // fuse_session_new copied what it needs
  if (session_ == nullptr) return cache::Status::invalidArgument("cannot create the FUSE session");
  if (config_.adoptFd >= 0) {
    const std::string fdPath = "/dev/fd/" + std::to_string(config_.adoptFd);
    if (fuse_session_mount(session_, fdPath.c_str()) != 0) {
      return cache::Status::ioError("cannot adopt the FUSE descriptor of " + mountpoint);
    }
    return replayHandshake();
  }
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    return cache::Status::ioError("cannot mount on " + mountpoint);
  }
  mounted_ = true;
  if (!config_.supervised) return cache::Status::ok();
  cache::Status s = handshake();
  if (s.isOk()) mounted_ = false;  // from here on the supervisor unmounts
  return s;
}

cache::Status FuseServer::handshake() {
  auto msg = FuseInitReplay::receive(session_);
  if (!msg.isOk()) return msg.status();
  initMessage_ = std::move(msg).value();
  if (!initDone_ || fuse_session_exited(session_)) {
    return cache::Status::ioError("the FUSE_INIT handshake failed");
  }
  return cache::Status::ok();
}

cache::Status FuseServer::replayHandshake() {
  cache::Status s = FuseInitReplay::replay(session_, config_.initMessage);
  if (!s.isOk()) return s;
  if (!initDone_) return cache::Status::ioError("replaying FUSE_INIT failed");
  if (!FuseInitReplay::requeueUnanswered(session_)) {
    spdlog::warn(
        "FUSE_NOTIFY_RESEND failed ({}): requests the previous worker had read "
        "stay unanswered",
        std::strerror(errno));
  }
  return cache::Status::ok();
}

bool FuseServer::restartRequested() const { return restart_.load(); }

void FuseServer::requestStop(bool restart) {
  cache::MutexLock lock(loopMu_);
  if (session_ == nullptr) return;
  if (restart) restart_.store(true);
  fuse_session_exit(session_);  // before loop(): it returns at once
  if (!looping_) return;
  // Ends the wait of the loop's thread; the loop then cancels its workers.
  pthread_kill(loopThread_, kWakeSignal);
}

int FuseServer::loop() {
  struct sigaction wake {};
  wake.sa_handler = onWakeSignal;  // no SA_RESTART: the loop's sem_wait returns
  sigemptyset(&wake.sa_mask);
  if (sigaction(kWakeSignal, &wake, nullptr) != 0) return 1;
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, config_.supervised ? 0 : 1);
  fuse_loop_cfg_set_max_threads(cfg, config_.threads);
  fuse_loop_cfg_set_idle_threads(cfg, config_.threads);
  {
    cache::MutexLock lock(loopMu_);
    loopThread_ = pthread_self();
    looping_ = true;
  }
  int rc = fuse_session_loop_mt(session_, cfg);
  {
    cache::MutexLock lock(loopMu_);  // no wake signal from here on
    looping_ = false;
  }
  fuse_loop_cfg_destroy(cfg);
  return rc;
}

void FuseServer::unmount() {
  if (mounted_) {
    fuse_session_unmount(session_);
    mounted_ = false;
  }
}

void FuseServer::onInit(fuse_conn_info* conn) {
  initDone_ = true;
  if (conn->proto_major == 7) {
    libfuseMinor_.store(FuseInitReplay::libfuseMinor(conn->proto_minor));
    kernelMinor_.store(conn->proto_minor);
  }
  if (config_.revalidateSeconds == 0) {
    // Pushed pages make reads invisible: then opens must reach the daemon.
    noOpenSupport_ = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0 &&
                     !(prefetcher_ != nullptr && prefetcher_->position().needsOpens());
    noOpendirSupport_ = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
    if (noOpendirSupport_) conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
  } else if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) {
    conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  }
  if (conn->capable & FUSE_CAP_READDIRPLUS) {
    conn->want |= FUSE_CAP_READDIRPLUS;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  }
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, kMaxReadBytes);
}

std::string FuseServer::kernelProtocol() const {
  const uint32_t kernel = kernelMinor_.load();
  return kernel == 0 ? "" : "7." + std::to_string(kernel);
}

std::string FuseServer::protocol() const {
  const uint32_t kernel = kernelMinor_.load();
  if (kernel == 0) return "";
  const uint32_t lib = libfuseMinor_.load();
  return "7." + std::to_string(lib == 0 ? kernel : std::min(kernel, lib));
}

double FuseServer::timeout() const {
  return config_.revalidateSeconds > 0 ? config_.revalidateSeconds : kImmutableTimeout;
}

fuse_entry_param FuseServer::entryFor(fuse_ino_t ino) const {
  fuse_entry_param e{};
  e.ino = ino;
  e.generation = 1;
  e.attr_timeout = timeout();
  e.entry_timeout = timeout();
  ns_.fillStat(ino, &e.attr);
  return e;
}

void FuseServer::onLookup(FuseReply& reply, fuse_ino_t parent, const char* name) {
  if (!ns_.valid(parent)) return (void)reply.err(ENOENT);
  const auto ino = ns_.lookup(parent, name);
  if (ino == 0) return (void)reply.err(ENOENT);
  revalidate(ino);
  if (ns_.attr(ino).gone) return (void)reply.err(ENOENT);
  fuse_entry_param e = entryFor(ino);
  reply.entry(e);
}

void FuseServer::onGetattr(FuseReply& reply, fuse_ino_t ino, fuse_file_info*) {
  if (!ns_.valid(ino)) return (void)reply.err(ENOENT);
  revalidate(ino);
  if (ns_.attr(ino).gone) return (void)reply.err(ENOENT);
  struct stat st;
  ns_.fillStat(ino, &st);
  reply.attr(st, timeout());
}

void FuseServer::onReadlink(FuseReply& reply, fuse_ino_t ino) {
  if (!ns_.valid(ino) || !S_ISLNK(ns_.attr(ino).mode)) return (void)reply.err(EINVAL);
  reply.readlink(std::string(ns_.symlinkTarget(ino)).c_str());
}

void FuseServer::onOpen(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi) {
  if (noOpenSupport_) return (void)reply.err(ENOSYS);  // zero-message open
  if (!ns_.valid(ino)) return (void)reply.err(ENOENT);
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
    return (void)reply.err(EROFS);
  }
  if (config_.revalidateSeconds == 0) {
    // --push-page-cache=on, immutable snapshot: the open tells the
    // prefetcher where the reader is; the kernel keeps (pushed) pages.
    if (prefetcher_ != nullptr) prefetcher_->onOpen(ns_.fileId(ino), config_.job);
    fi->keep_cache = 1;
    return (void)reply.open(*fi);
  }
  // The change may have been seen by an earlier lookup/getattr: the kernel
  // drops the old pages itself only when mtime or size moved, and the queued
  // notification may not have run yet, so the first open after any change
  // always asks the kernel to drop them (keep_cache = 0 does, synchronously).
  const bool changed = revalidate(ino);
  const bool dropPages =
      changed || (stalePages_ && stalePages_->at(ino).exchange(false, std::memory_order_acq_rel));
  if (ns_.attr(ino).gone) return (void)reply.err(ENOENT);
  if (prefetcher_ != nullptr && S_ISREG(ns_.attr(ino).mode))
    prefetcher_->onOpen(ns_.fileId(ino), config_.job);
  // Pin this open to the version it saw: its reads never mix versions.
  {
    cache::MutexLock lock(opensMu_);
    // Random base: handles of a previous worker are not mistaken for ours.
    if (nextFh_ == 0) nextFh_ = uint64_t{std::random_device{}()} << 24;
    fi->fh = ++nextFh_;
    opens_.emplace(fi->fh, ns_.identity(ino));
  }
  fi->keep_cache = dropPages ? 0 : 1;
  if (reply.open(*fi) != 0) {
    cache::MutexLock lock(opensMu_);
    opens_.erase(fi->fh);
  }
}

void FuseServer::onRelease(FuseReply& reply, fuse_ino_t, fuse_file_info* fi) {
  {
    cache::MutexLock lock(opensMu_);
    opens_.erase(fi->fh);
  }
  reply.err(0);
}

void FuseServer::onOpendir(FuseReply& reply, fuse_ino_t ino, fuse_file_info* fi) {
  if (noOpendirSupport_) return (void)reply.err(ENOSYS);
  if (!ns_.valid(ino) || !S_ISDIR(ns_.attr(ino).mode)) return (void)reply.err(ENOTDIR);
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  reply.open(*fi);
}

void FuseServer::onRead(FuseReply& reply, fuse_ino_t ino, size_t size, off_t off,
                        fuse_file_info* fi) {
  if (!ns_.valid(ino)) return (void)reply.err(ENOENT);
  cache::FileIdentity id;
  bool pinned = false;
  if (fi != nullptr && fi->fh != 0) {
    cache::MutexLock lock(opensMu_);
    auto it = opens_.find(fi->fh);
    if (it != opens_.end()) id = it->second, pinned = true;
  }
  if (!pinned) {
    // A kept snapshot: the file may have changed since; checked before any byte is served.
    if (config_.validateFirstUse) {
      revalidate(ino);
      if (ns_.attr(ino).gone) return (void)reply.err(ENOENT);
    }
    id = ns_.identity(ino);  // zero-message open, or opened by a previous worker
  }
  const uint64_t offset = static_cast<uint64_t>(off);
  if (size == 0 || offset >= id.size) return (void)reply.buf(nullptr, 0);
  const uint64_t end = std::min<uint64_t>(offset + std::min(size, kMaxReadBytes), id.size);
  const uint32_t cs = cache_.chunkSize();
  const uint32_t first = static_cast<uint32_t>(offset / cs);
  const uint32_t last = static_cast<uint32_t>((end - 1) / cs);

  // Fixed-size arrays: no allocation per read on the hit path.
  constexpr size_t kMaxPieces = kMaxReadBytes / 4096 + 2;
  cache::ChunkRef refs[kMaxPieces];
  iovec iov[kMaxPieces];
  size_t n = 0;
  const std::string& path = ns_.path(ino);
  auto worst = cache::ChunkCache::Tier::kRam;
  for (uint32_t idx = first; idx <= last && n < kMaxPieces; ++idx, ++n) {
    cache::ChunkCache::Tier tier;
    auto r = cache_.get(path, id, idx, &tier);
    if (!r.isOk()) {
      spdlog::warn("read {} chunk {}: {}", path, idx, r.status().toString());
      return (void)reply.err(toErrno(r.status()));
    }
    refs[n] = std::move(r).value();
    const uint64_t chunkStart = uint64_t{idx} * cs;
    const uint64_t from = std::max(offset, chunkStart) - chunkStart;
    const uint64_t to = std::min<uint64_t>(end - chunkStart, refs[n]->size());
    iov[n].iov_base = const_cast<char*>(refs[n]->data.data() + from);
    iov[n].iov_len = to > from ? to - from : 0;
    cache_.countServed(tier, iov[n].iov_len);
    worst = std::max(worst, tier);
  }
  if (prefetcher_ != nullptr) {
    prefetcher_->onRead(id.fileId, offset, end - offset, worst, config_.job);
    if (lastChunk_ && id.size > cs) maybeReadAhead(ino, id, first, last);
  }
  cache_.stats().readRequests.fetch_add(1, std::memory_order_relaxed);
  cache_.stats().readBytes.fetch_add(end - offset, std::memory_order_relaxed);
  counters_.readRequests.fetch_add(1, std::memory_order_relaxed);
  counters_.readBytes.fetch_add(end - offset, std::memory_order_relaxed);
  if (worst >= cache::ChunkCache::Tier::kPeer) {
    counters_.stalledReads.fetch_add(1, std::memory_order_relaxed);
  }
  reply.iov(iov, static_cast<int>(n));
}

void FuseServer::maybeReadAhead(fuse_ino_t ino, const cache::FileIdentity& id, uint32_t first,
                                uint32_t last) {
  // Sequential: this read starts in the chunk where the previous one ended,
  // or the next one (concurrent readers of one file make this approximate).
  const uint32_t prev = lastChunk_->at(ino).exchange(last + 1, std::memory_order_relaxed);
  if (first != 0 && first + 1 != prev && first != prev) return;
  const uint32_t target = last + 1 + config_.readAheadChunks;
  uint32_t from = std::max(readAheadTo_->at(ino).load(std::memory_order_relaxed), last + 1);
  if (first == 0) from = last + 1;  // a new pass over the file
  if (from >= target) return;
  readAheadTo_->at(ino).store(target, std::memory_order_relaxed);
  prefetcher_->readAhead(ns_.path(ino), id, from, target - from);
}

void FuseServer::onReaddir(FuseReply& reply, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  if (!ns_.valid(ino) || !S_ISDIR(ns_.attr(ino).mode)) return (void)reply.err(ENOTDIR);
  const auto& kids = ns_.children(ino);
  // Not zero-filled: the kernel asks for up to a megabyte per call and a
  // std::vector would memset (and fault in) all of it for a few entries.
  std::unique_ptr<char[]> buf(new char[size]);
  size_t used = 0;
  // Offsets: 1 = ".", 2 = "..", 3 + i = children[i].
  for (size_t pos = static_cast<size_t>(off); pos < kids.size() + 2; ++pos) {
    fuse_ino_t child;
    std::string name;
    if (pos == 0) {
      child = ino, name = ".";
    } else if (pos == 1) {
      child = ino == DatasetNamespace::kRootIno ? ino : ns_.parentOf(ino), name = "..";
    } else {
      child = kids[pos - 2];
      if (ns_.attr(child).gone) continue;
      name = ns_.name(child);
    }
    size_t len;
    if (plus) {
      fuse_entry_param e{};
      if (pos >= 2) {
        e = entryFor(child);
      } else {
        // "." and ".." carry no entry (the kernel does not look them up).
        ns_.fillStat(child, &e.attr);
      }
      len = reply.addDirentryPlus(buf.get() + used, size - used, name.c_str(), e,
                                  static_cast<off_t>(pos + 1));
    } else {
      struct stat st;
      ns_.fillStat(child, &st);
      len = reply.addDirentry(buf.get() + used, size - used, name.c_str(), st,
                              static_cast<off_t>(pos + 1));
    }
    if (len > size - used) break;
    used += len;
  }
  reply.buf(buf.get(), used);
}

void FuseServer::onStatfs(FuseReply& reply, fuse_ino_t) {
  struct statvfs sv {};
  sv.f_bsize = 1 << 20;
  sv.f_frsize = 4096;
  sv.f_blocks = (ns_.totalBytes() + 4095) / 4096;
  sv.f_files = ns_.nodeCount();
  sv.f_namemax = 255;
  sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
  reply.statfs(sv);
}

void FuseServer::onGetxattr(FuseReply& reply, fuse_ino_t ino, const char* name, size_t size) {
  if (ino != DatasetNamespace::kRootIno || config_.adminSocketPath.empty() ||
      std::strcmp(name, admin::kAdminXattr) != 0) {
    return (void)reply.err(ENODATA);
  }
  const std::string& v = config_.adminSocketPath;
  if (size == 0) return (void)reply.xattr(v.size());
  if (size < v.size()) return (void)reply.err(ERANGE);
  reply.buf(v.data(), v.size());
}

void FuseServer::onListxattr(FuseReply& reply, fuse_ino_t ino, size_t size) {
  std::string list;
  if (ino == DatasetNamespace::kRootIno && !config_.adminSocketPath.empty()) {
    list.assign(admin::kAdminXattr, std::strlen(admin::kAdminXattr) + 1);
  }
  if (size == 0) return (void)reply.xattr(list.size());
  if (size < list.size()) return (void)reply.err(ERANGE);
  reply.buf(list.data(), list.size());
}

}  // namespace epochfs::fusefs
