#include "tools/epochctl/admin_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "fusefs/admin_protocol.h"

namespace epochfs::ctl {

AdminClient::AdminClient(const std::string& mountpoint) {
  char path[sizeof(sockaddr_un::sun_path)];
  ssize_t n = getxattr(mountpoint.c_str(), admin::kAdminXattr, path, sizeof path - 1);
  if (n < 0) {
    if (errno == ENOENT) throw std::runtime_error(mountpoint + ": no such directory");
    if (errno == ENOTCONN) {
      throw std::runtime_error(mountpoint + ": daemon not responding (transport endpoint is "
                               "not connected; unmount with fusermount3 -u)");
    }
    throw std::runtime_error(mountpoint + ": not an epochfs mount");
  }
  path[n] = '\0';
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path, static_cast<size_t>(n) + 1);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(mountpoint + ": daemon not responding (" + path + ": " +
                             std::strerror(errno) + ")");
  }
  timeval tv{10, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

AdminClient::~AdminClient() {
  if (fd_ >= 0) close(fd_);
}

nlohmann::json AdminClient::call(const nlohmann::json& request) {
  std::string reply;
  if (!admin::sendMessage(fd_, request.dump()) || !admin::receiveMessage(fd_, reply)) {
    throw std::runtime_error("daemon not responding");
  }
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error("malformed reply from daemon");
  if (!j.value("ok", false)) throw std::runtime_error(j.value("error", std::string("failed")));
  return j;
}

}  // namespace epochfs::ctl
