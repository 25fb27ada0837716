// AdminClient: finds a mount's admin socket (the xattr on the mount root) and
// exchanges admin-protocol messages with its daemon.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace epochfs::ctl {

class AdminClient {
 public:
  // Connects to the daemon serving `mountpoint`; throws std::runtime_error
  // with a one-line reason ("not an epochfs mount", "daemon not responding").
  explicit AdminClient(const std::string& mountpoint);
  ~AdminClient();
  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // Sends `request`, returns the reply; throws on transport errors and on
  // {"ok": false} replies (with the daemon's error message).
  nlohmann::json call(const nlohmann::json& request);

 private:
  int fd_ = -1;
};

}  // namespace epochfs::ctl
