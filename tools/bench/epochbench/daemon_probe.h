// Finds the process serving a mount, to charge its CPU time to each pass.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace epochfs::bench {

// Sends `request` to the admin socket of the epochfs mounted at `mountpoint`
// (path from the xattr user.epochfs.admin on the mount root) and returns the
// reply; nullopt with `error` set on failure.
std::optional<nlohmann::json> adminRequest(const std::string& mountpoint,
                                           const nlohmann::json& request, std::string* error);

// The epochfs daemon's pid: the admin `status` reply's "pid", else the
// process named epochfs with `mountpoint` on its command line.
std::optional<pid_t> findEpochfsPid(const std::string& mountpoint);

// The bindfs process with `mountpoint` on its command line.
std::optional<pid_t> findBindfsPid(const std::string& mountpoint);

}  // namespace epochfs::bench
