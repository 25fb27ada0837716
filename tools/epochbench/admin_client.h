// A connection to the admin socket of an epochfs mount (fusefs/admin_protocol.h)
// that stays open across requests, and order registration over it: an order
// is streamed as order_begin, order_append... and order_commit on ONE
// connection, each message under the protocol's 64 KiB cap.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace epochfs::bench {

class AdminConnection {
 public:
  // Connects to the socket named by the xattr user.epochfs.admin of
  // `mountpoint`. Null with `error` set on failure. `timeout_s` bounds each
  // send and receive.
  static std::unique_ptr<AdminConnection> open(const std::string& mountpoint, std::string* error,
                                               int timeout_s = 30);
  ~AdminConnection();
  AdminConnection(const AdminConnection&) = delete;
  AdminConnection& operator=(const AdminConnection&) = delete;

  // Sends `request` and returns the reply if it is an object with "ok": true;
  // otherwise nullopt with `error` set (the daemon's message if it gave one).
  std::optional<nlohmann::json> request(const nlohmann::json& request, std::string* error);

 private:
  explicit AdminConnection(int fd) : fd_(fd) {}
  int fd_;
};

// Registers `entries` (paths relative to the mount, in access order) as the
// order of `epoch` for rank 0, starting at entry 0. Returns the entry count
// the daemon committed, or nullopt with `error` set.
std::optional<uint64_t> registerOrder(const std::string& mountpoint, int64_t epoch,
                                      const std::vector<std::string>& entries, std::string* error);

}  // namespace epochfs::bench
