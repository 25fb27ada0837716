// FuseServer: what changes in the source reach the kernel through — the
// --revalidate and first-use checks (revalidate, recheck), the invalidation
// thread, and the entries a refresh drops. fuse_server.h says the threading.
#include <spdlog/spdlog.h>

#include "cache/steady_clock.h"
#include "fusefs/fuse_server.h"

namespace epochfs::fusefs {

bool FuseServer::revalidate(fuse_ino_t ino) {
  if (checkedAt_ == nullptr || ino == DatasetNamespace::kRootIno) return false;
  const int64_t now = cache::steadyNowNs();
  std::atomic<int64_t>& checkedAt = checkedAt_->at(ino);
  if (config_.revalidateSeconds == 0) {
    // First use only: marked once checked, so a concurrent first reader
    // checks too rather than read an unchecked version.
    if (checkedAt.load(std::memory_order_acquire) != 0) return false;
  } else {
    const int64_t age = int64_t{config_.revalidateSeconds} * 1000000000;
    if (now - checkedAt.load(std::memory_order_relaxed) < age) return false;
    checkedAt.store(now, std::memory_order_relaxed);
  }
  const bool changed = recheck(ino);
  if (config_.revalidateSeconds == 0) checkedAt.store(now, std::memory_order_release);
  return changed;
}

bool FuseServer::recheck(fuse_ino_t ino) {
  NodeAttr old = ns_.attr(ino);
  NodeAttr fresh = old;
  auto st = source_.lstat(ns_.path(ino));
  if (st.isOk() && (st->st_mode & S_IFMT) == (old.mode & S_IFMT)) {
    fresh = attrFromStat(*st);
  } else {
    fresh.gone = true;
  }
  // A directory's size is not kept (DatasetNamespace serves 4096).
  if (S_ISDIR(fresh.mode)) fresh.size = old.size;
  const bool changed = fresh.gone != old.gone || fresh.size != old.size ||
                       fresh.mtimeNs != old.mtimeNs || fresh.ctimeNs != old.ctimeNs ||
                       fresh.sourceIno != old.sourceIno || fresh.mode != old.mode ||
                       fresh.uid != old.uid || fresh.gid != old.gid;
  if (!changed) return false;
  spdlog::info("revalidate: {} changed in the source", ns_.path(ino));
  const cache::FileIdentity oldId = ns_.identity(ino);
  ns_.setAttr(ino, fresh);
  if (S_ISREG(old.mode)) {
    cache_.invalidate(oldId);
    stalePages_->at(ino).store(true, std::memory_order_release);
    cache::MutexLock lock(invalMu_);
    invalQueue_.push_back(ino);
    invalCv_.notifyOne();
  }
  return true;
}

void FuseServer::invalidationLoop() {
  cache::MutexLock lock(invalMu_);
  for (;;) {
    invalCv_.wait(invalMu_, [&]() REQUIRES(invalMu_) { return stopping_ || !invalQueue_.empty(); });
    if (stopping_) return;
    fuse_ino_t ino = invalQueue_.front();
    invalQueue_.pop_front();
    lock.unlock();
    if (session_ != nullptr) fuse_lowlevel_notify_inval_inode(session_, ino, 0, 0);
    lock.lock();
  }
}

void FuseServer::dropKernelEntries(
    const std::vector<std::pair<DatasetNamespace::Ino, std::string>>& gone,
    const std::vector<DatasetNamespace::Ino>& stale) {
  if (session_ == nullptr) return;
  // ENOENT (nothing cached) is the common answer: nothing to do then.
  for (const auto& [parent, name] : gone) {
    fuse_lowlevel_notify_inval_entry(session_, parent, name.data(), name.size());
  }
  for (DatasetNamespace::Ino ino : stale) fuse_lowlevel_notify_inval_inode(session_, ino, 0, 0);
}

}  // namespace epochfs::fusefs
