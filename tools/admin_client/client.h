// Client: the one C++ client of the admin protocol (fusefs/admin_protocol.h),
// used by epochctl and epochbench. Finds a mount's admin socket (the xattr
// user.epochfs.admin on the mount root) or takes one, connects, and exchanges
// request/reply messages on that one connection (an order is streamed over one
// connection: order_writer.h). Every failure is a Result's Error; nothing
// throws except std::bad_alloc.
// Thread-safety: one Client per thread; advertisedSocket() is reentrant.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/admin_client/result.h"

namespace epochfs::admin {

class Client {
 public:
  // How long call() waits for a reply by default (refresh, a full evict and
  // order_commit pass longer ones).
  static constexpr double kDefaultTimeoutSeconds = 10;
  // How long advertisedSocket() waits for the mount root to answer getxattr
  // before it reports "daemon not responding" (docs/ADMIN.md).
  static constexpr std::chrono::milliseconds kMountAnswerTimeout{5000};

  // The socket `mountpoint` advertises. getxattr on a FUSE mount whose daemon
  // is stopped blocks, so it is asked from a detached thread and abandoned
  // after `wait` (that thread ends when the mount answers or with the process).
  // kUnreachable: no such directory, not an epochfs mount, not answering;
  // kDenied: the mount root is not readable by this user.
  static Result<std::string> advertisedSocket(const std::string& mountpoint,
                                              std::chrono::milliseconds wait = kMountAnswerTimeout);

  // Connects to the daemon serving `mountpoint`, or to `socketPath` when it is
  // not empty (then `mountpoint` only names the daemon in messages and may be
  // empty). kUnreachable, or kDenied when the socket refuses this user.
  static Result<Client> connect(const std::string& mountpoint, const std::string& socketPath = "");

  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Sends `request` and waits at most `timeoutSeconds` for the reply (and for
  // the send). The reply when it is {"ok": true, ...}; else kRejected (kDenied
  // for the daemon's kErrPermissionDenied) with the daemon's "error",
  // kUnreachable when the connection fails, times out or carries a malformed
  // frame, kProtocol for a request over the cap or a reply that is not a JSON
  // object. After a kUnreachable or kProtocol reply the connection is unusable.
  Result<nlohmann::json> call(const nlohmann::json& request,
                              double timeoutSeconds = kDefaultTimeoutSeconds);

  // The name used in messages: the mountpoint, else the socket path.
  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& socketPath() const { return socketPath_; }

 private:
  Client(std::string mountpoint, std::string socketPath, int fd);
  const std::string& label() const { return mountpoint_.empty() ? socketPath_ : mountpoint_; }

  std::string mountpoint_;
  std::string socketPath_;
  int fd_ = -1;
};

}  // namespace epochfs::admin
