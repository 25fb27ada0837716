#include "tools/admin_client/client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

namespace {

// What the getxattr thread hands back; shared so that an abandoned thread
// still writes into live memory.
struct XattrAnswer {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ssize_t n = -1;
  int err = 0;
  char value[sizeof(sockaddr_un::sun_path)] = {};
};

Error unreachable(std::string message) { return {ErrorKind::kUnreachable, std::move(message), {}}; }

// A string field of a reply, or `fallback` when absent or not a string.
std::string stringField(const nlohmann::json& j, const char* key, const char* fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string(fallback);
}

void setTimeouts(int fd, double seconds) {
  const double whole = std::floor(seconds);
  timeval tv{static_cast<time_t>(whole), static_cast<suseconds_t>((seconds - whole) * 1e6)};
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;  // 0 would mean "wait forever"
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

Result<std::string> Client::advertisedSocket(const std::string& mountpoint,
                                             std::chrono::milliseconds wait) {
  auto r = std::make_shared<XattrAnswer>();
  std::thread([r, mountpoint] {
    char buf[sizeof r->value];
    const ssize_t n = getxattr(mountpoint.c_str(), kAdminXattr, buf, sizeof buf - 1);
    const int err = errno;
    std::lock_guard<std::mutex> lock(r->mu);
    r->n = n;
    r->err = err;
    if (n > 0) std::memcpy(r->value, buf, static_cast<size_t>(n));
    r->done = true;
    r->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(r->mu);
  if (!r->cv.wait_for(lock, wait, [&] { return r->done; })) {
    return unreachable(mountpoint + ": daemon not responding (the mount does not answer)");
  }
  if (r->n < 0) {
    switch (r->err) {
      case ENOENT:
        return unreachable(mountpoint + ": no such directory");
      case ENOTCONN:
        return unreachable(mountpoint +
                           ": daemon not responding (transport endpoint is not "
                           "connected; unmount with fusermount3 -u)");
      case EACCES:
      case EPERM:
        return Error{ErrorKind::kDenied,
                     mountpoint +
                         ": permission denied reading the mount root (a mount "
                         "without --allow-other is private to its owner)",
                     {}};
      default:
        return unreachable(mountpoint + ": not an epochfs mount");
    }
  }
  // The value may or may not carry its own terminator.
  std::string path(r->value, static_cast<size_t>(r->n));
  while (!path.empty() && path.back() == '\0') path.pop_back();
  if (path.empty()) return unreachable(mountpoint + ": not an epochfs mount");
  return path;
}

Result<Client> Client::connect(const std::string& mountpoint, const std::string& socketPath) {
  std::string path = socketPath;
  if (path.empty()) {
    auto advertised = advertisedSocket(mountpoint);
    if (!advertised) return advertised.error();
    path = std::move(*advertised);
  }
  const std::string& label = mountpoint.empty() ? path : mountpoint;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return unreachable("admin socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    return Error{err == EACCES ? ErrorKind::kDenied : ErrorKind::kUnreachable,
                 label + ": daemon not responding (" + path + ": " + std::strerror(err) + ")",
                 {}};
  }
  return Client(mountpoint, std::move(path), fd);
}

Client::Client(std::string mountpoint, std::string socketPath, int fd)
    : mountpoint_(std::move(mountpoint)), socketPath_(std::move(socketPath)), fd_(fd) {}

Client::Client(Client&& other) noexcept
    : mountpoint_(std::move(other.mountpoint_)),
      socketPath_(std::move(other.socketPath_)),
      fd_(std::exchange(other.fd_, -1)) {}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    mountpoint_ = std::move(other.mountpoint_);
    socketPath_ = std::move(other.socketPath_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

Result<nlohmann::json> Client::call(const nlohmann::json& request, double timeoutSeconds) {
  const std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (body.size() > kMaxMessageBytes) {
    return Error{ErrorKind::kProtocol,
                 "request of " + std::to_string(body.size()) + " bytes is over the " +
                     std::to_string(kMaxMessageBytes) + "-byte message cap",
                 {}};
  }
  setTimeouts(fd_, timeoutSeconds);
  std::string reply;
  errno = 0;
  if (!sendMessage(fd_, body) || !receiveMessage(fd_, reply)) {
    // errno: EAGAIN after a timeout, 0 after a close or an over-cap length.
    const int err = errno;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
    const std::string why = err == EAGAIN || err == EWOULDBLOCK
                                ? std::string("no reply within ") + seconds + " s"
                            : err != 0 ? std::string(std::strerror(err))
                                       : std::string("connection closed or malformed message");
    return unreachable(label() + ": daemon not responding (" + why + ")");
  }
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  const auto ok = j.is_object() ? j.find("ok") : j.end();
  if (j.is_discarded() || !j.is_object() || (ok != j.end() && !ok->is_boolean())) {
    return Error{ErrorKind::kProtocol, "malformed reply from the daemon", {}};
  }
  if (ok == j.end() || !ok->get<bool>()) {
    std::string code = stringField(j, "code", "");
    return Error{code == kErrPermissionDenied ? ErrorKind::kDenied : ErrorKind::kRejected,
                 stringField(j, "error", "failed"), std::move(code)};
  }
  return j;
}

}  // namespace epochfs::admin
