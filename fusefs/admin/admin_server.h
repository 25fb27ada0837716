// AdminServer: serves the admin protocol (fusefs/admin_protocol.h) on a Unix
// file socket for `epochctl`. One accept thread; each connection gets its own
// short-lived thread, at most kMaxConnections at once (more get a one-line
// refusal and are closed at once, never queued). Every message must arrive
// whole within kReceiveTimeoutSeconds of the previous reply (a slow or silent
// client cannot hold a slot); a message over the 64 KiB cap gets an error
// reply, its bytes are discarded (bounded) and the connection is closed, so
// the daemon never allocates for it. The caller's uid/gid/pid come from
// SO_PEERCRED and are passed to handlers, which decide what that caller may do
// (fusefs/admin/admin_auth.h).
// Thread-safety: handle() before start(); everything else from any thread.
#pragma once

#include <sys/types.h>

#include <any>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

struct AdminCaller {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// One connection: who is calling, and state a multi-message command (such as
// a streamed order or a warm job) keeps between its messages. Destroyed when
// the connection ends (a warm job in `state` is cancelled then).
// The mount a socket serves when a daemon serves several (each mount root
// advertises its own socket): requests through it act on that mount's job.
struct AdminMount {
  uint32_t id = 0;  // the mount's job (prefetch::AccessPlan::job)
  uid_t owner = 0;  // who may steer this mount (--owner; else the user who mounted it)
};

struct AdminSession {
  AdminCaller caller;
  AdminMount mount;  // the socket's (AdminServer::setMount)
  std::any state;
  // The caller's supplementary groups, read from /proc on first need.
  std::optional<std::vector<gid_t>> groups;
  // Set by a handler: runs once its reply has been sent (unmount, upgrade:
  // the caller gets its answer before the daemon stops).
  std::function<void()> afterReply;
};

// Thrown by handlers for a refusal; the reply carries {"ok": false, "error":
// what(), "code": code()}, code() one of admin::kErrorCodes. Other
// std::exceptions reply with admin::kErrInvalid.
class AdminError : public std::runtime_error {
 public:
  AdminError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

  static AdminError permissionDenied(const std::string& m) {
    return AdminError(admin::kErrPermissionDenied, "permission denied: " + m);
  }
  static AdminError invalid(const std::string& m) { return AdminError(admin::kErrInvalid, m); }
  static AdminError notFound(const std::string& m) { return AdminError(admin::kErrNotFound, m); }
  static AdminError tooLarge(const std::string& m) { return AdminError(admin::kErrTooLarge, m); }
  static AdminError unavailable(const std::string& m) {
    return AdminError(admin::kErrUnavailable, m);
  }
  // Maps a Status to the closest code.
  static AdminError from(const cache::Status& s);

 private:
  std::string code_;
};

// Counters since start (docs/METRICS.md, `admin.*`).
struct AdminServerCounters {
  std::atomic<uint64_t> connections{0};  // accepted and served
  std::atomic<uint64_t> refused{0};      // closed at once: kMaxConnections already open
  std::atomic<uint64_t> requests{0};     // messages dispatched
  std::atomic<uint64_t> errors{0};       // replies with ok=false (denials included)
  std::atomic<uint64_t> denied{0};       // replies with kErrPermissionDenied
  std::atomic<uint64_t> oversized{0};    // messages over the cap (connection closed)
  std::atomic<uint64_t> timeouts{0};     // connections closed mid-message or idle
};

class AdminServer {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr int kReceiveTimeoutSeconds = 5;
  // After an oversized header, at most this much is read and discarded (so
  // the client can read the error reply) before the connection is closed.
  static constexpr uint64_t kMaxDiscardBytes = 64ull << 20;

  using Handler = std::function<nlohmann::json(const nlohmann::json& request, AdminSession&)>;

  AdminServer() = default;
  ~AdminServer();

  // Registers `cmd` before start(). A handler returns the reply body; "ok"
  // defaults to true. It may throw AdminError (or std::exception) to reply
  // {"ok": false}. A name registered twice is kept once and fails start().
  void handle(const std::string& cmd, Handler h);
  // The mount this socket serves; before start() (default: id 0, owner uid 0).
  void setMount(AdminMount m) { mount_ = m; }

  // Binds `path` (its directory must exist and be writable only by us) and
  // starts serving. Fails, serving nothing, unless the commands registered
  // are exactly admin::kCommands, each once (the registry: admin_protocol.h).
  cache::Status start(const std::string& path);
  // Stops accepting, wakes every open connection and waits for them to end.
  void stop();
  const std::string& path() const { return path_; }
  const AdminServerCounters& counters() const { return counters_; }

  // The default socket path for a mount: /run/epochfs/ for root, else
  // $XDG_RUNTIME_DIR/epochfs/ (or /tmp/epochfs-UID/). Creates the directory
  // (0755, refusing one another user owns or others can write).
  static cache::Result<std::string> defaultPath(const std::string& mountpoint);

 private:
  enum class Received { kMessage, kClosed, kTimeout, kTooLarge };

  void acceptLoop();
  void serve(int fd);
  // Joins the connection threads that have ended (all of them with `all`).
  void joinFinished(bool all);
  Received receive(int fd, std::string& out, uint32_t* announced);
  void refuseOversized(int fd, uint32_t announced);
  std::string dispatch(const std::string& message, AdminSession& session);

  std::map<std::string, Handler> handlers_;
  std::vector<std::string> registeredTwice_;
  std::string path_;
  AdminMount mount_;
  int listenFd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptThread_;
  AdminServerCounters counters_;

  cache::Mutex connMu_;
  cache::CondVar connCv_;                    // waits with connMu_: a connection ended
  std::set<int> conns_ GUARDED_BY(connMu_);  // fds of connections being served
  // One thread per connection, joined once it ended (never detached: none
  // outlives stop()). Keyed by a connection number, as fds are reused.
  std::map<uint64_t, std::thread> threads_ GUARDED_BY(connMu_);
  std::vector<uint64_t> finished_ GUARDED_BY(connMu_);
  uint64_t nextConnection_ GUARDED_BY(connMu_) = 0;
};

}  // namespace epochfs::fusefs
