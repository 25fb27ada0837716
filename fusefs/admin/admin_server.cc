#include "fusefs/admin/admin_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;
using Clock = std::chrono::steady_clock;

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

int millisUntil(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(ms);
}

// Reads exactly n bytes before `deadline`: 1 done, 0 peer closed/error, -1 timeout.
int readBefore(int fd, char* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const int ms = millisUntil(deadline);
    if (ms == 0) return -1;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = poll(&pfd, 1, ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return -1;
    if (pr < 0) return 0;
    const ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return 0;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 1;
}

std::string errorReply(const std::string& code, const std::string& message) {
  return nlohmann::json{{"ok", false}, {"code", code}, {"error", message}}.dump();
}

}  // namespace

AdminError AdminError::from(const cache::Status& s) {
  using C = cache::Status::Code;
  switch (s.code()) {
    case C::kNotFound:
      return notFound(s.message());
    case C::kPermissionDenied:
      return permissionDenied(s.message());
    case C::kTooLarge:
      return tooLarge(s.message());
    case C::kInvalidArgument:
      return invalid(s.message());
    default:
      return AdminError(admin::kErrFailed, s.toString());
  }
}

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

void AdminServer::handle(const std::string& cmd, Handler h) {
  if (!handlers_.emplace(cmd, std::move(h)).second) registeredTwice_.push_back(cmd);
}

namespace {

// Empty when `handlers` holds exactly admin::kCommands, else what differs.
std::string registryMismatch(const std::map<std::string, AdminServer::Handler>& handlers,
                             const std::vector<std::string>& twice) {
  std::string problems;
  const auto add = [&](const std::string& what) {
    if (!problems.empty()) problems.append("; ");
    problems.append(what);
  };
  // (std::string appends: GCC 12's -Wrestrict misfires on "literal" + string.)
  const auto quoted = [](const std::string& name) {
    return std::string(1, '\'').append(name) + "'";
  };
  for (const auto& name : twice) add(quoted(name) + " registered twice");
  std::set<std::string> declared;
  for (const char* name : admin::kCommands) {
    declared.insert(name);
    if (handlers.count(name) == 0) add(quoted(name) + " not registered");
  }
  for (const auto& [name, h] : handlers) {
    if (declared.count(name) == 0) add(quoted(name) + " is not in admin_protocol.h kCommands");
  }
  return problems;
}

}  // namespace

Status AdminServer::start(const std::string& path) {
  if (const std::string bad = registryMismatch(handlers_, registeredTwice_); !bad.empty()) {
    return Status::invalidArgument("admin commands: " + bad);
  }
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
  if (listen(listenFd_, kMaxConnections) != 0) return Status::fromErrno(errno, "listen " + path);
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
  // Wake every connection blocked on its client; handlers in progress finish.
  {
    cache::MutexLock lock(connMu_);
    for (int fd : conns_) shutdown(fd, SHUT_RDWR);
    if (!connCv_.waitFor(connMu_, std::chrono::seconds(120),
                         [&]() REQUIRES(connMu_) { return conns_.empty(); })) {
      spdlog::error("admin: {} connections still busy at shutdown; waiting for them",
                    conns_.size());
    }
  }
  joinFinished(true);
}

void AdminServer::joinFinished(bool all) {
  std::vector<std::thread> done;
  {
    cache::MutexLock lock(connMu_);
    if (all) {
      for (auto& [id, t] : threads_) done.push_back(std::move(t));
      threads_.clear();
    } else {
      for (uint64_t id : finished_) {
        done.push_back(std::move(threads_.at(id)));
        threads_.erase(id);
      }
    }
    finished_.clear();
  }
  for (auto& t : done) t.join();
}

void AdminServer::acceptLoop() {
  while (!stopping_.load()) {
    joinFinished(false);
    pollfd p{listenFd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    {
      cache::MutexLock lock(connMu_);
      if (conns_.size() < static_cast<size_t>(kMaxConnections) && !stopping_.load()) {
        conns_.insert(fd);
        counters_.connections.fetch_add(1, std::memory_order_relaxed);
        const uint64_t id = nextConnection_++;
        threads_.emplace(id, std::thread([this, fd, id] {
                           serve(fd);
                           cache::MutexLock l(connMu_);
                           conns_.erase(fd);
                           close(fd);
                           finished_.push_back(id);
                           connCv_.notifyAll();
                         }));
        continue;
      }
    }
    // Flood: refuse rather than queue (one small reply, never blocking).
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    const std::string msg = errorReply(
        admin::kErrUnavailable,
        "too many admin connections (" + std::to_string(kMaxConnections) + " open); try again");
    const uint32_t n = static_cast<uint32_t>(msg.size());
    unsigned char hdr[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8), 0,
                            0};
    std::string framed(reinterpret_cast<char*>(hdr), 4);
    framed += msg;
    ssize_t w = send(fd, framed.data(), framed.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
    close(fd);
  }
}

AdminServer::Received AdminServer::receive(int fd, std::string& out, uint32_t* announced) {
  const auto deadline = Clock::now() + std::chrono::seconds(kReceiveTimeoutSeconds);
  unsigned char hdr[4];
  int r = readBefore(fd, reinterpret_cast<char*>(hdr), 4, deadline);
  if (r <= 0) return r == 0 ? Received::kClosed : Received::kTimeout;
  const uint32_t n =
      hdr[0] | (hdr[1] << 8) | (hdr[2] << 16) | (static_cast<uint32_t>(hdr[3]) << 24);
  if (n > admin::kMaxMessageBytes) {
    *announced = n;
    return Received::kTooLarge;
  }
  out.resize(n);
  r = readBefore(fd, out.data(), n, deadline);
  if (r <= 0) return r == 0 ? Received::kClosed : Received::kTimeout;
  return Received::kMessage;
}

void AdminServer::refuseOversized(int fd, uint32_t announced) {
  counters_.oversized.fetch_add(1, std::memory_order_relaxed);
  counters_.errors.fetch_add(1, std::memory_order_relaxed);
  admin::sendMessage(fd,
                     errorReply(admin::kErrTooLarge, "message of " + std::to_string(announced) +
                                                         " bytes exceeds the " +
                                                         std::to_string(admin::kMaxMessageBytes) +
                                                         "-byte cap; closing the connection"));
  shutdown(fd, SHUT_WR);
  // Discard what the client is still sending (bounded in bytes and time), so
  // it gets to read the reply instead of a reset.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  uint64_t left = std::min<uint64_t>(announced, kMaxDiscardBytes);
  char buf[64 * 1024];
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, sizeof buf));
    pollfd pfd{fd, POLLIN, 0};
    const int ms = millisUntil(deadline);
    if (ms == 0 || poll(&pfd, 1, ms) <= 0) break;
    const ssize_t r = recv(fd, buf, want, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) break;
    left -= static_cast<uint64_t>(r);
  }
}

void AdminServer::serve(int fd) {
  timeval tv{kReceiveTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
  AdminSession session;
  session.caller = AdminCaller{cred.pid, cred.uid, cred.gid};
  session.mount = mount_;
  std::string message;
  while (!stopping_.load()) {
    uint32_t announced = 0;
    switch (receive(fd, message, &announced)) {
      case Received::kMessage: {
        const bool sent = admin::sendMessage(fd, dispatch(message, session));
        if (session.afterReply) {  // the request was accepted: it runs, answered or not
          auto then = std::move(session.afterReply);
          session.afterReply = nullptr;
          then();
        }
        if (!sent) return;
        break;
      }
      case Received::kTooLarge:
        refuseOversized(fd, announced);
        return;
      case Received::kTimeout:
        counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
        return;
      case Received::kClosed:
        return;
    }
  }
}

std::string AdminServer::dispatch(const std::string& message, AdminSession& session) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  nlohmann::json reply;
  std::string code;
  try {
    nlohmann::json request = nlohmann::json::parse(message);
    if (!request.is_object() || !request.contains("cmd") || !request["cmd"].is_string()) {
      throw AdminError::invalid("request must be an object with a string \"cmd\"");
    }
    auto it = handlers_.find(request["cmd"].get<std::string>());
    if (it == handlers_.end()) {
      throw AdminError::invalid("unknown command '" + request["cmd"].get<std::string>() + "'");
    }
    reply = it->second(request, session);
    if (!reply.contains("ok")) reply["ok"] = true;
  } catch (const AdminError& e) {
    code = e.code();
    reply = {{"ok", false}, {"code", e.code()}, {"error", e.what()}};
  } catch (const std::exception& e) {
    code = admin::kErrInvalid;
    reply = {{"ok", false}, {"code", code}, {"error", e.what()}};
  }
  if (!code.empty()) {
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    if (code == admin::kErrPermissionDenied)
      counters_.denied.fetch_add(1, std::memory_order_relaxed);
  }
  std::string out = reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (out.size() > admin::kMaxMessageBytes) {
    spdlog::error("admin: reply to {} too large ({} bytes)", message.substr(0, 40), out.size());
    out = errorReply(admin::kErrInternal, "reply too large");
  }
  return out;
}

}  // namespace epochfs::fusefs
