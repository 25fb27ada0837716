// AdminServer: serves the admin protocol (fusefs/admin_protocol.h) on a Unix
// file socket for `epochctl`. One accept thread; each connection gets its own
// short-lived thread, at most kMaxConnections at once (more are closed at
// once), with a receive timeout so a slow or silent client cannot hold one.
// The caller's uid/gid/pid come from SO_PEERCRED and are passed to handlers,
// which decide what that caller may do.
#pragma once

#include <sys/types.h>

#include <any>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/status.h"

namespace epochfs::fusefs {

struct AdminCaller {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// One connection: who is calling, and state a multi-message command (such as
// a streamed order) keeps between its messages.
struct AdminSession {
  AdminCaller caller;
  std::any state;
};

class AdminServer {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr int kReceiveTimeoutSeconds = 5;

  using Handler = std::function<nlohmann::json(const nlohmann::json& request, AdminSession&)>;

  AdminServer() = default;
  ~AdminServer();

  // Registers `cmd` before start(). A handler returns the reply body; "ok"
  // defaults to true. It may throw std::exception to reply {"ok":false}.
  void handle(const std::string& cmd, Handler h) { handlers_[cmd] = std::move(h); }

  // Binds `path` (its directory must exist and be writable only by us) and
  // starts serving.
  cache::Status start(const std::string& path);
  void stop();
  const std::string& path() const { return path_; }

  // The default socket path for a mount: /run/epochfs/ for root, else
  // $XDG_RUNTIME_DIR/epochfs/ (or /tmp/epochfs-UID/). Creates the directory
  // (0755, refusing one another user owns or others can write).
  static cache::Result<std::string> defaultPath(const std::string& mountpoint);

 private:
  void acceptLoop();
  void serve(int fd);
  std::string dispatch(const std::string& message, AdminSession& session);

  std::map<std::string, Handler> handlers_;
  std::string path_;
  int listenFd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_{0};
  std::thread acceptThread_;
};

}  // namespace epochfs::fusefs
