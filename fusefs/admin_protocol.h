// The admin protocol: the single door between the daemon and tools/.
// A Unix stream socket whose path the mount root advertises in the xattr
// `user.epochfs.admin`. Each message (either direction) is a 4-byte
// little-endian length followed by that many bytes of UTF-8 JSON, at most
// kMaxMessageBytes. A request is {"cmd": NAME, ...}; a reply is
// {"ok": true, ...} or {"ok": false, "code": CODE, "error": MESSAGE}.
// The counters clients read are named in fusefs/admin_counters.h.
// Header-only and dependency-free so tools can include it.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fusefs/admin_counters.h"

namespace epochfs::admin {

inline constexpr const char* kAdminXattr = "user.epochfs.admin";
inline constexpr uint32_t kMaxMessageBytes = 64 * 1024;

// Commands the daemon serves: every name here and nowhere else (the daemon,
// epochctl, epochbench and the Python epochfs.admin use these; CTest
// `admin-command-names` checks the tree for literals). Replies: docs/ADMIN.md.
inline constexpr const char* kCmdStatus = "status";    // version, pid, source, options, tiers
inline constexpr const char* kCmdStats = "stats";      // counters (docs/METRICS.md)
inline constexpr const char* kCmdMetrics = "metrics";  // {text}: Prometheus exposition
// schema -> {metrics: [{path, kind, unit, help, family, labels, row_label}...]}:
// every declared counter (fusefs/admin/metric_registry.h), for clients to render.
inline constexpr const char* kCmdSchema = "schema";
inline constexpr const char* kCmdPeers = "peers";  // cluster members and their counters
// placement {start, count} -> a page of [path, owner node] (the sampler's map).
inline constexpr const char* kCmdPlacement = "placement";
inline constexpr const char* kCmdPlans = "plans";  // the registered orders, summarised
// plan_entries {rank, offset} -> a page of one registered order.
inline constexpr const char* kCmdPlanEntries = "plan_entries";
inline constexpr const char* kCmdRefresh = "refresh";  // re-snapshot the source
inline constexpr const char* kCmdUnmount = "unmount";
inline constexpr const char* kCmdUpgrade = "upgrade";  // restart from the binary on disk
// join {mountpoint, allow_other}: the daemon mounts one more mountpoint of its
// dataset (a second `epochfs SRC MNT` of the same user; docs/ADMIN.md "One
// daemon, several mounts"). Sent by the epochfs command, not by epochctl.
inline constexpr const char* kCmdJoin = "join";
// Residency and the cache: ls {paths}; warm_add {paths} repeated, warm_start,
// warm_progress; evict {paths | all, tier}.
inline constexpr const char* kCmdLs = "ls";
inline constexpr const char* kCmdWarmAdd = "warm_add";
inline constexpr unsigned kDefaultWarmThreads = 8;  // warm_start's `threads` when absent
inline constexpr const char* kCmdWarmStart = "warm_start";
inline constexpr const char* kCmdWarmProgress = "warm_progress";
inline constexpr const char* kCmdEvict = "evict";
// A registered order (docs/PREFETCH.md), streamed over one connection:
// order_begin {epoch, rank, start}; order_append {entries: [...]} repeated;
// order_commit -> {entries: N}. order_clear drops every plan.
inline constexpr const char* kCmdOrderBegin = "order_begin";
inline constexpr const char* kCmdOrderAppend = "order_append";
inline constexpr const char* kCmdOrderCommit = "order_commit";
inline constexpr const char* kCmdOrderClear = "order_clear";
// chunk_shards {files: [[file id or path, first chunk, chunks]...]} -> {shards:
// ["0f3a..." or null...]}: each chunk's RAM shard among 16, for `epochctl mrc`.
// At most kMaxChunkShards chunks a request, so that the reply fits a message.
inline constexpr const char* kCmdChunkShards = "chunk_shards";
inline constexpr uint64_t kMaxChunkShards = 16384;

// Every command, once: the daemon refuses to start unless it registered
// exactly these (AdminServer::start).
inline constexpr const char* kCommands[] = {
    kCmdStatus,     kCmdStats,       kCmdMetrics,     kCmdPeers,        kCmdPlacement,
    kCmdPlans,      kCmdPlanEntries, kCmdRefresh,     kCmdUnmount,      kCmdUpgrade,
    kCmdLs,         kCmdWarmAdd,     kCmdWarmStart,   kCmdWarmProgress, kCmdEvict,
    kCmdOrderBegin, kCmdOrderAppend, kCmdOrderCommit, kCmdOrderClear,   kCmdChunkShards,
    kCmdSchema,     kCmdJoin};

// Error codes: the "code" of an {"ok": false} reply, every one here (the
// daemon's AdminError, the C++ and Python clients use these; CTest
// `admin-command-names` checks the tree for literals and the Python twins
// ERR_*). Meanings: docs/ADMIN.md.
inline constexpr const char* kErrPermissionDenied = "permission_denied";
inline constexpr const char* kErrInvalid = "invalid";
inline constexpr const char* kErrNotFound = "not_found";
inline constexpr const char* kErrTooLarge = "too_large";
inline constexpr const char* kErrUnavailable = "unavailable";
inline constexpr const char* kErrFailed = "failed";      // a Status with no closer code
inline constexpr const char* kErrInternal = "internal";  // the reply did not fit a message
inline constexpr const char* kErrorCodes[] = {kErrPermissionDenied, kErrInvalid,     kErrNotFound,
                                              kErrTooLarge,         kErrUnavailable, kErrFailed,
                                              kErrInternal};

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

// Paths in requests and replies are strings when they are valid UTF-8, and
// {"b64": BASE64 OF THE RAW BYTES} otherwise, so every file stays addressable.
inline bool isValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return false;  // bad lead byte or truncated
    for (size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n + 1;
  }
  return true;
}

inline constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

inline std::string base64Encode(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(raw[i])) << 16;
    if (i + 1 < raw.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(raw[i + 1])) << 8;
    if (i + 2 < raw.size()) v |= static_cast<unsigned char>(raw[i + 2]);
    out += kBase64Alphabet[v >> 18];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += i + 1 < raw.size() ? kBase64Alphabet[(v >> 6) & 63] : '=';
    out += i + 2 < raw.size() ? kBase64Alphabet[v & 63] : '=';
  }
  return out;
}

// Decodes until '=' or the end; false on a character outside the alphabet.
inline bool base64Decode(std::string_view text, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* p = c == '\0' ? nullptr : std::strchr(kBase64Alphabet, c);
    if (p == nullptr) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kBase64Alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

}  // namespace epochfs::admin
