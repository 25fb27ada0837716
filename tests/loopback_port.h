// A TCP port on 127.0.0.1 for tests that start UCX listeners or daemons on
// loopback. It is taken below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port the kernel picked with
// bind(0) is free only a moment, and under `ctest -j` another test's outgoing
// connection can get it as its local port before the listener binds it
// ("Address already in use"). Below that range the kernel hands out nothing
// by itself, so the only risk left is another test choosing the same port in
// the same instant: the start is random per process and every call moves on.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <random>

namespace epochfs::test_support {

inline bool loopbackPortBindable(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

inline uint16_t freeLoopbackPort() {
  constexpr int kLowest = 20000;
  int ephemeralLow = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeralLow;
  const int span = ephemeralLow - kLowest;
  if (span < 1000) return 0;  // an unusual range: callers see port 0 and fail clearly
  static std::atomic<int> next{static_cast<int>(std::random_device{}() % span)};
  for (int tries = 0; tries < span; ++tries) {
    const auto port = static_cast<uint16_t>(kLowest + next.fetch_add(1) % span);
    if (loopbackPortBindable(port)) return port;
  }
  return 0;
}

}  // namespace epochfs::test_support
