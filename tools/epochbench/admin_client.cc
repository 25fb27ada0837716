#include "tools/epochbench/admin_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fusefs/admin_protocol.h"

namespace epochfs::bench {
namespace {

using nlohmann::json;

// Room left in an order_append message for the envelope and a safety margin.
constexpr size_t kAppendBudget = admin::kMaxMessageBytes - 1024;

}  // namespace

std::unique_ptr<AdminConnection> AdminConnection::open(const std::string& mountpoint,
                                                       std::string* error, int timeout_s) {
  char socket_path[sizeof(sockaddr_un::sun_path)] = {};
  ssize_t n =
      ::getxattr(mountpoint.c_str(), admin::kAdminXattr, socket_path, sizeof(socket_path) - 1);
  if (n <= 0) {
    *error = std::string("getxattr ") + admin::kAdminXattr + ": " + std::strerror(errno);
    return nullptr;
  }
  socket_path[n] = '\0';  // the value may or may not carry its own terminator

  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  timeval timeout{.tv_sec = timeout_s, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path, std::strlen(socket_path));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = std::string("connect ") + socket_path + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<AdminConnection>(new AdminConnection(fd));
}

AdminConnection::~AdminConnection() { ::close(fd_); }

std::optional<json> AdminConnection::request(const json& request, std::string* error) {
  std::string reply;
  if (!admin::sendMessage(fd_, request.dump()) || !admin::receiveMessage(fd_, reply)) {
    *error = std::string("admin socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  auto parsed = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    *error = "admin reply is not a JSON object";
    return std::nullopt;
  }
  if (!parsed.value("ok", false)) {
    *error = "admin error: " + parsed.value("error", std::string("(none given)"));
    return std::nullopt;
  }
  return parsed;
}

std::optional<uint64_t> registerOrder(const std::string& mountpoint, int64_t epoch,
                                      const std::vector<std::string>& entries, std::string* error) {
  auto conn = AdminConnection::open(mountpoint, error);
  if (!conn) return std::nullopt;
  if (!conn->request({{"cmd", admin::kCmdOrderBegin}, {"epoch", epoch}, {"rank", 0}, {"start", 0}},
                     error)) {
    return std::nullopt;
  }
  json batch = json::array();
  size_t batch_bytes = 0;
  auto flush = [&]() -> bool {
    if (batch.empty()) return true;
    bool ok =
        conn->request({{"cmd", admin::kCmdOrderAppend}, {"entries", batch}}, error).has_value();
    batch = json::array();
    batch_bytes = 0;
    return ok;
  };
  for (const auto& path : entries) {
    size_t bytes = json(path).dump().size() + 1;  // quoted, escaped, plus a comma
    if (batch_bytes + bytes > kAppendBudget && !flush()) return std::nullopt;
    batch.push_back(path);
    batch_bytes += bytes;
  }
  if (!flush()) return std::nullopt;
  auto reply = conn->request({{"cmd", admin::kCmdOrderCommit}}, error);
  if (!reply) return std::nullopt;
  return reply->value("entries", uint64_t{0});
}

}  // namespace epochfs::bench
