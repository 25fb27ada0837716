// AdminClient: finds a mount's admin socket (the xattr on the mount root, or
// --socket) and exchanges admin-protocol messages with its daemon.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace epochfs::ctl {

// An error for the user: one line, and the exit status epochctl ends with.
class CtlError : public std::runtime_error {
 public:
  static constexpr int kFailed = 1;    // the command failed (daemon said why)
  static constexpr int kNoDaemon = 3;  // not an epochfs mount / daemon not responding
  static constexpr int kDenied = 4;    // permission denied
  CtlError(const std::string& message, int exitCode = kFailed)
      : std::runtime_error(message), exitCode_(exitCode) {}
  int exitCode() const { return exitCode_; }

 private:
  int exitCode_;
};

class AdminClient {
 public:
  static constexpr double kDefaultTimeoutSeconds = 10;

  // Connects to the daemon serving `mountpoint` (or to `socketPath` if not
  // empty); throws CtlError with a one-line reason ("not an epochfs mount",
  // "daemon not responding", ...).
  explicit AdminClient(const std::string& mountpoint, const std::string& socketPath = "");
  ~AdminClient();
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // Sends `request`, returns the reply; throws CtlError on transport errors
  // and on {"ok": false} replies (with the daemon's message). `timeoutSeconds`
  // bounds the wait for the reply (refresh re-walks the source: longer).
  nlohmann::json call(const nlohmann::json& request,
                      double timeoutSeconds = kDefaultTimeoutSeconds);

  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& socketPath() const { return socketPath_; }

  // The socket a mount root advertises (getxattr, bounded by a timeout so a
  // hung daemon cannot hang epochctl).
  static std::string advertisedSocket(const std::string& mountpoint);

 private:
  std::string mountpoint_;
  std::string socketPath_;
  int fd_ = -1;
};

}  // namespace epochfs::ctl
