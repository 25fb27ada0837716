// FakeS3Server: a minimal HTTP/1.1 server on 127.0.0.1 for S3Client's unit
// tests (s3_client_test.cc, s3_client_retry_test.cc): one thread per
// connection, requests without bodies, the handler's reply sent as it is (it
// says Content-Length); a reply of kCloseWithoutAnswer closes the connection
// instead (a reset as the client sees it). Plus the helpers that build
// replies and a client pointed at the server.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "transport/s3/s3_client.h"

namespace epochfs::transport::s3::fake_s3 {

using namespace std::chrono_literals;

struct HttpRequest {
  std::string method, target;
  std::map<std::string, std::string> headers;  // names lower case
};

// The reply that makes the server close the connection without answering.
inline const std::string kCloseWithoutAnswer = "\x01close";

class FakeServer {
 public:
  using Handler = std::function<std::string(const HttpRequest&)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listenFd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listenFd_, 64) != 0 ||
        getsockname(listenFd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }

  ~FakeServer() {
    stopping_ = true;
    shutdown(listenFd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    close(listenFd_);
    std::vector<std::thread> conns;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
      conns.swap(conns_);
    }
    for (auto& t : conns) t.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int maxConcurrent() const { return maxConcurrent_.load(); }
  std::vector<HttpRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void acceptLoop() {
    for (;;) {
      const int fd = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping_) return;
        continue;
      }
      connections_++;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      conns_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    std::string in;
    char chunk[4096];
    for (;;) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          closeConnection(fd);
          return;
        }
        in.append(chunk, static_cast<size_t>(n));
      }
      HttpRequest req = parse(in.substr(0, end));
      in.erase(0, end + 4);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      const int now = ++concurrent_;
      for (int m = maxConcurrent_.load();
           now > m && !maxConcurrent_.compare_exchange_weak(m, now);) {
      }
      const std::string reply = handler_(req);
      --concurrent_;
      if (reply == kCloseWithoutAnswer) {
        // RST rather than FIN: SO_LINGER 0, as a reset connection.
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        closeConnection(fd);
        return;
      }
      for (size_t sent = 0; sent < reply.size();) {
        const ssize_t n = send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      if (reply.find("Connection: close") != std::string::npos) {
        closeConnection(fd);
        return;
      }
    }
  }

  // Closes a connection and forgets its fd (the number may be reused).
  void closeConnection(int fd) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
    }
    close(fd);
  }

  static HttpRequest parse(const std::string& head) {
    HttpRequest r;
    size_t at = head.find("\r\n");
    const std::string line = head.substr(0, at);
    r.method = line.substr(0, line.find(' '));
    r.target = line.substr(r.method.size() + 1, line.rfind(' ') - r.method.size() - 1);
    while (at != std::string::npos && at + 2 < head.size()) {
      const size_t next = head.find("\r\n", at + 2);
      const std::string h = head.substr(at + 2, next - at - 2);
      const size_t colon = h.find(':');
      std::string name = h.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] =
          colon == std::string::npos ? "" : h.substr(h.find_first_not_of(' ', colon + 1));
      at = next;
    }
    return r;
  }

  Handler handler_;
  int listenFd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> conns_;
  std::vector<HttpRequest> requests_;
  std::atomic<int> connections_{0}, concurrent_{0}, maxConcurrent_{0};
};

inline std::string reply(int status, const std::string& body, const std::string& headers = "") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + headers + "\r\n" + body;
}

inline std::string object(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + i / 251);
  return s;
}

// [first, last] of "bytes=first-last".
inline std::pair<uint64_t, uint64_t> rangeOf(const HttpRequest& r) {
  const std::string v = r.headers.at("range");
  const size_t dash = v.find('-');
  return {std::stoull(v.substr(6, dash - 6)), std::stoull(v.substr(dash + 1))};
}

// A well-behaved GET of `obj`: 206 of the range asked, 416 past the end.
inline std::string serveRange(const std::string& obj, const HttpRequest& r) {
  auto [first, last] = rangeOf(r);
  if (first >= obj.size()) {
    return reply(416, "", "Content-Range: bytes */" + std::to_string(obj.size()) + "\r\n");
  }
  last = std::min<uint64_t>(last, obj.size() - 1);
  return reply(206, obj.substr(first, last - first + 1),
               "Content-Range: bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" +
                   std::to_string(obj.size()) + "\r\n");
}

// A client of `server` (bucket "bkt"), signed with AKIDEXAMPLE unless `sign`
// is false; `tweak` changes the rest of the configuration.
inline std::unique_ptr<S3Client> client(
    const FakeServer& server, bool sign = true, unsigned maxInFlight = 32,
    const std::function<void(S3ClientConfig&)>& tweak = nullptr) {
  S3ClientConfig cfg;
  cfg.endpoint = *S3Endpoint::make(server.url(), "us-east-1", "bkt", Addressing::kAuto);
  if (sign) cfg.credentials = Credentials("AKIDEXAMPLE", "SECRETEXAMPLE");
  cfg.maxInFlight = maxInFlight;
  cfg.requestTimeout = 10s;
  if (tweak) tweak(cfg);
  auto c = S3Client::create(std::move(cfg));
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? std::move(c).value() : nullptr;
}

}  // namespace epochfs::transport::s3::fake_s3
