// MountSet: the FUSE sessions of one daemon — the mount it started with and
// those that joined it later (docs/ARCHITECTURE.md "One daemon, several
// mounts"). Every session serves on a thread of its own; one whose mount went
// away (unmounted) ends alone while the others serve on. wait() returns once
// every session has ended, or all were stopped.
// Thread-safety: every method from any thread; wait() from one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/fuse_server.h"

namespace epochfs::fusefs {

class MountSet {
 public:
  MountSet() = default;
  ~MountSet();  // stops and joins what still serves
  MountSet(const MountSet&) = delete;
  MountSet& operator=(const MountSet&) = delete;

  // Holds `server`, already mounted at `mountpoint` as mount `id`; it serves
  // on a thread of its own from start() on (at once when added after
  // start()). Added after stop(), it is told to stop at once.
  cache::Status add(uint32_t id, const std::string& mountpoint, std::unique_ptr<FuseServer> server);
  void start();
  // Ends every session (`restart`: the worker is to be started again); a
  // session added later is refused.
  void stop(bool restart);
  bool stopping() const;
  // Ends mount `id` alone (wait() then reaps it, or returns if it was the
  // last); returns its mountpoint, or not found.
  cache::Result<std::string> unmount(uint32_t id);
  // The mountpoint of mount `id` while it is served, else notFound.
  cache::Result<std::string> served(uint32_t id) const;

  using Ended = std::function<void(uint32_t id, const std::string& mountpoint)>;
  // Blocks until no session serves. `ended(id, mountpoint)` runs on this thread
  // for each session whose mount went away while others still served (the
  // supervisor forgets it); a session is destroyed after that, except the
  // last, which stays until this object goes (what was bound to it, such as
  // the kernel page pusher, is closed first). Returns the worker's exit
  // code: kWorkerExitRestart after stop(true), else 0, or 1 when a session
  // failed.
  int wait(const Ended& ended);

  std::vector<std::string> mountpoints() const;
  bool serves(const std::string& mountpoint) const;
  // The first session still held (for its protocol and descriptor); null if none.
  // Valid until the next wait() reaps it; call from the waiting thread or
  // before wait().
  FuseServer* first() const;
  // `f(id, mountpoint, server)` for each session held, under the set's lock
  // (short calls only).
  void forEach(
      const std::function<void(uint32_t id, const std::string& mountpoint, FuseServer&)>& f) const;

 private:
  struct Session {
    uint32_t id = 0;
    std::string mountpoint;
    std::unique_ptr<FuseServer> server;
    std::thread thread;
    bool ended = false;
    int rc = 0;
  };

  mutable cache::Mutex mu_;
  cache::CondVar cv_;  // with mu_: a session ended
  std::vector<std::unique_ptr<Session>> sessions_ GUARDED_BY(mu_);
  void launch(Session* s) REQUIRES(mu_);

  bool started_ GUARDED_BY(mu_) = false;
  int stop_ GUARDED_BY(mu_) = 0;  // 1: stop, 2: restart
  bool failed_ GUARDED_BY(mu_) = false;
};

}  // namespace epochfs::fusefs
