#include "tools/bench/epochbench/daemon_probe.h"

#include <cstdio>
#include <utility>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/client.h"
#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {

std::optional<nlohmann::json> adminRequest(const std::string& mountpoint,
                                           const nlohmann::json& request, std::string* error) {
  constexpr double kTimeoutSeconds = 5;
  auto client = admin::Client::connect(mountpoint);
  auto reply = client ? client->call(request, kTimeoutSeconds) : client.error();
  if (!reply) {
    *error = reply.error().message;
    return std::nullopt;
  }
  return std::move(*reply);
}

std::optional<pid_t> findEpochfsPid(const std::string& mountpoint) {
  std::string error;
  auto status = adminRequest(mountpoint, {{"cmd", admin::kCmdStatus}}, &error);
  if (status && status->contains("pid") && (*status)["pid"].is_number_integer()) {
    return (*status)["pid"].get<pid_t>();
  }
  if (status) error = "status reply has no integer \"pid\"";
  std::fprintf(stderr, "epochfs pid via admin socket failed (%s); scanning /proc\n", error.c_str());
  return findProcessByMount("epochfs", mountpoint);
}

std::optional<pid_t> findBindfsPid(const std::string& mountpoint) {
  return findProcessByMount("bindfs", mountpoint);
}

}  // namespace epochfs::bench
