// The admin protocol: the single door between the daemon and tools/.
// A Unix stream socket whose path the mount root advertises in the xattr
// `user.epochfs.admin`. Each message (either direction) is a 4-byte
// little-endian length followed by that many bytes of UTF-8 JSON, at most
// kMaxMessageBytes. A request is {"cmd": NAME, ...}; a reply is
// {"ok": true, ...} or {"ok": false, "error": MESSAGE}.
// Header-only and dependency-free so tools can include it.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace epochfs::admin {

inline constexpr const char* kAdminXattr = "user.epochfs.admin";
inline constexpr uint32_t kMaxMessageBytes = 64 * 1024;

// Commands the daemon serves.
inline constexpr const char* kCmdStatus = "status";  // version, pid, source, options, tiers
inline constexpr const char* kCmdStats = "stats";    // counters (docs/METRICS.md)
// A registered order (docs/PREFETCH.md), streamed over one connection:
// order_begin {epoch, rank, start}; order_append {entries: [...]} repeated;
// order_commit -> {entries: N}. order_clear drops every plan.
inline constexpr const char* kCmdOrderBegin = "order_begin";
inline constexpr const char* kCmdOrderAppend = "order_append";
inline constexpr const char* kCmdOrderCommit = "order_commit";
inline constexpr const char* kCmdOrderClear = "order_clear";

namespace detail {
inline bool writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
inline bool readAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
}  // namespace detail

// Sends one framed message; false on error or if it is over the cap.
inline bool sendMessage(int fd, const std::string& json) {
  if (json.size() > kMaxMessageBytes) return false;
  uint32_t n = static_cast<uint32_t>(json.size());
  unsigned char hdr[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                          static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  return detail::writeAll(fd, reinterpret_cast<const char*>(hdr), 4) &&
         detail::writeAll(fd, json.data(), json.size());
}

// Receives one framed message into `out`; false on EOF, error, timeout (set
// SO_RCVTIMEO on the socket) or a length over the cap.
inline bool receiveMessage(int fd, std::string& out) {
  unsigned char hdr[4];
  if (!detail::readAll(fd, reinterpret_cast<char*>(hdr), 4)) return false;
  uint32_t n = hdr[0] | (hdr[1] << 8) | (hdr[2] << 16) | (static_cast<uint32_t>(hdr[3]) << 24);
  if (n > kMaxMessageBytes) return false;
  out.resize(n);
  return detail::readAll(fd, out.data(), n);
}

}  // namespace epochfs::admin
