#include "fusefs/admin_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

Status ensurePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::fromErrno(errno, "cannot create admin socket directory " + dir);
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return Status::fromErrno(errno, "stat " + dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return Status::permissionDenied("admin socket directory " + dir +
                                    " must be a directory owned by us and writable by nobody else");
  }
  return Status::ok();
}

}  // namespace

AdminServer::~AdminServer() { stop(); }

Result<std::string> AdminServer::defaultPath(const std::string& mountpoint) {
  std::string dir;
  if (geteuid() == 0) {
    dir = "/run/epochfs";
  } else if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg) {
    dir = std::string(xdg) + "/epochfs";
  } else {
    dir = "/tmp/epochfs-" + std::to_string(geteuid());
  }
  Status s = ensurePrivateDir(dir);
  if (!s.isOk()) return s;
  char name[64];
  snprintf(name, sizeof name, "/mount-%016llx.sock",
           static_cast<unsigned long long>(XXH3_64bits(mountpoint.data(), mountpoint.size())));
  return dir + name;
}

Status AdminServer::start(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return Status::invalidArgument("socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  listenFd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) return Status::fromErrno(errno, "socket");
  // A socket file left by a dead daemon of this mountpoint is ours to replace;
  // a live one answers connect(), and then we refuse.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::invalidArgument(path + " exists and is not a socket");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(probe);
    if (live) return Status::unavailable("admin socket " + path + " is in use by another daemon");
    unlink(path.c_str());
  }
  if (bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::fromErrno(errno, "bind " + path);
  }
  // Anyone may connect; each command checks the caller's credentials.
  chmod(path.c_str(), 0666);
  if (listen(listenFd_, 64) != 0) return Status::fromErrno(errno, "listen " + path);
  path_ = path;
  acceptThread_ = std::thread([this] { acceptLoop(); });
  return Status::ok();
}

void AdminServer::stop() {
  if (stopping_.exchange(true)) return;
  if (listenFd_ >= 0) shutdown(listenFd_, SHUT_RDWR);
  if (acceptThread_.joinable()) acceptThread_.join();
  if (listenFd_ >= 0) close(listenFd_);
  if (!path_.empty()) unlink(path_.c_str());
  // Let running connections notice and finish (bounded by the receive timeout).
  for (int i = 0; i < 100 * kReceiveTimeoutSeconds && active_.load() > 0; ++i) usleep(10000);
}

void AdminServer::acceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listenFd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (active_.load() >= kMaxConnections) {
      close(fd);  // flood: refuse rather than queue
      continue;
    }
    active_.fetch_add(1);
    std::thread([this, fd] {
      serve(fd);
      close(fd);
      active_.fetch_sub(1);
    }).detach();
  }
}

void AdminServer::serve(int fd) {
  timeval tv{kReceiveTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
  AdminSession session;
  session.caller = AdminCaller{cred.pid, cred.uid, cred.gid};
  std::string message;
  while (!stopping_.load() && admin::receiveMessage(fd, message)) {
    if (!admin::sendMessage(fd, dispatch(message, session))) return;
  }
}

std::string AdminServer::dispatch(const std::string& message, AdminSession& session) {
  nlohmann::json reply;
  try {
    nlohmann::json request = nlohmann::json::parse(message);
    if (!request.is_object() || !request.contains("cmd") || !request["cmd"].is_string()) {
      throw std::invalid_argument("request must be an object with a string \"cmd\"");
    }
    auto it = handlers_.find(request["cmd"].get<std::string>());
    if (it == handlers_.end()) {
      throw std::invalid_argument("unknown command '" + request["cmd"].get<std::string>() + "'");
    }
    reply = it->second(request, session);
    if (!reply.contains("ok")) reply["ok"] = true;
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"error", e.what()}};
  }
  std::string out = reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (out.size() > admin::kMaxMessageBytes) {
    out = nlohmann::json{{"ok", false}, {"error", "reply too large"}}.dump();
  }
  return out;
}

}  // namespace epochfs::fusefs
