#include "fusefs/daemon/mount_set.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "fusefs/daemon/supervisor_link.h"

namespace epochfs::fusefs {

using cache::MutexLock;
using cache::Status;

MountSet::~MountSet() {
  stop(false);
  std::vector<std::unique_ptr<Session>> left;
  {
    MutexLock lock(mu_);
    left.swap(sessions_);
  }
  for (auto& s : left) {
    if (s->thread.joinable()) s->thread.join();
  }
}

Status MountSet::add(uint32_t id, const std::string& mountpoint,
                     std::unique_ptr<FuseServer> server) {
  MutexLock lock(mu_);
  auto s = std::make_unique<Session>();
  s->id = id;
  s->mountpoint = mountpoint;
  s->server = std::move(server);
  if (stop_ != 0) s->server->requestStop(stop_ == 2);  // loop() then returns at once
  if (started_) launch(s.get());
  sessions_.push_back(std::move(s));
  return Status::ok();
}

void MountSet::start() {
  MutexLock lock(mu_);
  started_ = true;
  for (auto& s : sessions_) {
    if (!s->thread.joinable() && !s->ended) launch(s.get());
  }
}

void MountSet::launch(Session* s) {
  s->thread = std::thread([this, s] {
    const int rc = s->server->loop();
    MutexLock l(mu_);
    s->ended = true;
    s->rc = rc;
    cv_.notifyAll();
  });
}

void MountSet::stop(bool restart) {
  MutexLock lock(mu_);
  if (stop_ == 0) stop_ = restart ? 2 : 1;
  for (auto& s : sessions_) s->server->requestStop(restart);
}

cache::Result<std::string> MountSet::unmount(uint32_t id) {
  MutexLock lock(mu_);
  for (auto& s : sessions_) {
    if (s->id != id || s->ended) continue;
    s->server->requestStop(false);
    return s->mountpoint;
  }
  return Status::notFound("this mount is no longer served");
}

cache::Result<std::string> MountSet::served(uint32_t id) const {
  MutexLock lock(mu_);
  for (const auto& s : sessions_) {
    if (s->id == id && !s->ended) return s->mountpoint;
  }
  return Status::notFound("this mount is no longer served");
}

bool MountSet::stopping() const {
  MutexLock lock(mu_);
  return stop_ != 0;
}

int MountSet::wait(const Ended& ended) {
  MutexLock lock(mu_);
  for (;;) {
    cv_.wait(mu_, [this]() REQUIRES(mu_) {
      return sessions_.empty() || std::any_of(sessions_.begin(), sessions_.end(),
                                              [](const auto& s) { return s->ended; });
    });
    const auto live =
        std::count_if(sessions_.begin(), sessions_.end(), [](const auto& s) { return !s->ended; });
    if (live == 0) break;
    // One mount of several went away: the others serve on.
    auto it =
        std::find_if(sessions_.begin(), sessions_.end(), [](const auto& s) { return s->ended; });
    std::unique_ptr<Session> gone = std::move(*it);
    sessions_.erase(it);
    if (gone->rc != 0) failed_ = true;
    lock.unlock();
    gone->thread.join();
    gone->server->unmount();
    spdlog::info("{} unmounted; {} other mount(s) still served", gone->mountpoint, live);
    ended(gone->id, gone->mountpoint);
    gone.reset();
    lock.lock();
  }
  // Every session ended: nothing more may join; the last ones stay held.
  if (stop_ == 0) stop_ = 1;
  const bool restart = stop_ == 2;
  bool failed = failed_;
  std::vector<Session*> last;
  for (auto& s : sessions_) {
    last.push_back(s.get());
    if (s->rc != 0) failed = true;
  }
  lock.unlock();
  for (Session* s : last) {
    if (s->thread.joinable()) s->thread.join();
    s->server->unmount();  // a no-op when supervised: the supervisor owns the mounts
  }
  if (restart) return kWorkerExitRestart;
  return failed ? 1 : 0;
}

std::vector<std::string> MountSet::mountpoints() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& s : sessions_) {
    if (!s->ended) out.push_back(s->mountpoint);
  }
  return out;
}

bool MountSet::serves(const std::string& mountpoint) const {
  MutexLock lock(mu_);
  return std::any_of(sessions_.begin(), sessions_.end(),
                     [&](const auto& s) { return !s->ended && s->mountpoint == mountpoint; });
}

FuseServer* MountSet::first() const {
  MutexLock lock(mu_);
  return sessions_.empty() ? nullptr : sessions_.front()->server.get();
}

void MountSet::forEach(
    const std::function<void(uint32_t, const std::string&, FuseServer&)>& f) const {
  MutexLock lock(mu_);
  for (const auto& s : sessions_) f(s->id, s->mountpoint, *s->server);
}

}  // namespace epochfs::fusefs
