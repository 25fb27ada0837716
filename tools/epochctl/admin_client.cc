#include "tools/epochctl/admin_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "fusefs/admin_protocol.h"

namespace epochfs::ctl {

namespace {

struct XattrResult {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ssize_t n = -1;
  int err = 0;
  char value[sizeof(sockaddr_un::sun_path)] = {};
};

}  // namespace

std::string AdminClient::advertisedSocket(const std::string& mountpoint) {
  // getxattr on a FUSE mount whose daemon is stopped blocks: ask from a
  // thread and give up after a while (the thread dies with the process).
  auto r = std::make_shared<XattrResult>();
  std::thread([r, mountpoint] {
    char buf[sizeof r->value];
    const ssize_t n = getxattr(mountpoint.c_str(), admin::kAdminXattr, buf, sizeof buf - 1);
    const int err = errno;
    std::lock_guard<std::mutex> lock(r->mu);
    r->n = n;
    r->err = err;
    if (n > 0) std::memcpy(r->value, buf, static_cast<size_t>(n));
    r->done = true;
    r->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(r->mu);
  if (!r->cv.wait_for(lock, std::chrono::seconds(5), [&] { return r->done; })) {
    throw CtlError(mountpoint + ": daemon not responding (the mount does not answer)",
                   CtlError::kNoDaemon);
  }
  if (r->n < 0) {
    switch (r->err) {
      case ENOENT:
        throw CtlError(mountpoint + ": no such directory", CtlError::kNoDaemon);
      case ENOTCONN:
        throw CtlError(mountpoint +
                           ": daemon not responding (transport endpoint is not "
                           "connected; unmount with fusermount3 -u)",
                       CtlError::kNoDaemon);
      case EACCES:
      case EPERM:
        throw CtlError(mountpoint +
                           ": permission denied reading the mount root (a mount "
                           "without --allow-other is private to its owner)",
                       CtlError::kDenied);
      default:
        throw CtlError(mountpoint + ": not an epochfs mount", CtlError::kNoDaemon);
    }
  }
  return std::string(r->value, static_cast<size_t>(r->n));
}

AdminClient::AdminClient(const std::string& mountpoint, const std::string& socketPath)
    : mountpoint_(mountpoint),
      socketPath_(socketPath.empty() ? advertisedSocket(mountpoint) : socketPath) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socketPath_.size() >= sizeof addr.sun_path) {
    throw CtlError("admin socket path too long: " + socketPath_, CtlError::kNoDaemon);
  }
  std::memcpy(addr.sun_path, socketPath_.c_str(), socketPath_.size() + 1);
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    throw CtlError(
        mountpoint + ": daemon not responding (" + socketPath_ + ": " + std::strerror(err) + ")",
        err == EACCES ? CtlError::kDenied : CtlError::kNoDaemon);
  }
}

AdminClient::~AdminClient() {
  if (fd_ >= 0) close(fd_);
}

nlohmann::json AdminClient::call(const nlohmann::json& request, double timeoutSeconds) {
  const auto secs = static_cast<time_t>(timeoutSeconds);
  timeval tv{secs, static_cast<suseconds_t>((timeoutSeconds - static_cast<double>(secs)) * 1e6)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (body.size() > admin::kMaxMessageBytes) {
    throw CtlError("request of " + std::to_string(body.size()) + " bytes is over the " +
                   std::to_string(admin::kMaxMessageBytes) + "-byte message cap");
  }
  std::string reply;
  if (!admin::sendMessage(fd_, body) || !admin::receiveMessage(fd_, reply)) {
    throw CtlError(mountpoint_ + ": daemon not responding", CtlError::kNoDaemon);
  }
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw CtlError("malformed reply from the daemon");
  if (!j.value("ok", false)) {
    throw CtlError(j.value("error", std::string("failed")),
                   j.value("code", std::string()) == "permission_denied" ? CtlError::kDenied
                                                                         : CtlError::kFailed);
  }
  return j;
}

}  // namespace epochfs::ctl
