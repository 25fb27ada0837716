#include "fusefs/admin/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace epochfs::fusefs {

using cache::Status;

namespace {

void sendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

std::string response(const char* status, const char* type, const std::string& body) {
  return std::string("HTTP/1.0 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace

Status MetricsHttpServer::start(uint16_t port) {
  listenFd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) return Status::fromErrno(errno, "metrics socket");
  int one = 1;
  setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::fromErrno(errno,
                             "--metrics-port: cannot bind 127.0.0.1:" + std::to_string(port));
  }
  if (listen(listenFd_, 16) != 0) return Status::fromErrno(errno, "metrics listen");
  socklen_t len = sizeof addr;
  getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { loop(); });
  return Status::ok();
}

void MetricsHttpServer::stop() {
  if (stopping_.exchange(true)) return;
  if (listenFd_ >= 0) shutdown(listenFd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listenFd_ >= 0) close(listenFd_);
  listenFd_ = -1;
}

void MetricsHttpServer::loop() {
  while (!stopping_.load()) {
    pollfd p{listenFd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    serveOne(fd);
    close(fd);
  }
}

void MetricsHttpServer::serveOne(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string req;
  char buf[2048];
  // The request line and headers end with an empty line.
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0 || req.size() > 8192) return;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return;
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  const size_t eol = req.find_first_of("\r\n");
  const std::string line = req.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos) return;
  const std::string method = line.substr(0, sp1);
  std::string target =
      line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
  if (const size_t q = target.find('?'); q != std::string::npos) target.resize(q);
  if (method != "GET" && method != "HEAD") {
    sendAll(fd, response("405 Method Not Allowed", "text/plain", "only GET /metrics\n"));
    return;
  }
  if (target != "/metrics") {
    sendAll(fd, response("404 Not Found", "text/plain", "see /metrics\n"));
    return;
  }
  scrapes_.fetch_add(1, std::memory_order_relaxed);
  std::string body;
  try {
    body = render_();
  } catch (const std::exception& e) {
    spdlog::warn("metrics: {}", e.what());
    sendAll(fd, response("500 Internal Server Error", "text/plain", "render failed\n"));
    return;
  }
  std::string out = response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
  if (method == "HEAD") out.resize(out.size() - body.size());
  sendAll(fd, out);
}

}  // namespace epochfs::fusefs
