// MetricsHttpServer: `--metrics-port PORT` — a tiny HTTP/1.0 responder for
// Prometheus scrapes, bound to 127.0.0.1 only (never another address). One
// thread, one connection at a time: each request must arrive within 2 s and
// fit in 8 KiB; GET /metrics answers 200 with the exposition text, other
// paths 404, other methods 405; the connection is then closed.
// Thread-safety: start/stop from one thread; the render callback runs on the
// server's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "cache/status.h"

namespace epochfs::fusefs {

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;

  explicit MetricsHttpServer(Render render) : render_(std::move(render)) {}
  ~MetricsHttpServer() { stop(); }
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds 127.0.0.1:port (0: any free port) and starts serving.
  cache::Status start(uint16_t port);
  void stop();
  // The bound port (after start).
  uint16_t port() const { return port_; }
  uint64_t scrapes() const { return scrapes_.load(); }

 private:
  void loop();
  void serveOne(int fd);

  Render render_;
  int listenFd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> scrapes_{0};
  std::thread thread_;
};

}  // namespace epochfs::fusefs
