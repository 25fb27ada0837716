// `epochctl warm MOUNTPOINT PATH... | --list FILE` and `epochctl evict
// MOUNTPOINT PATH... | --all [--tier ram|disk]`. warm streams the paths
// (warm_add, batched under the message cap), starts the daemon-side job
// (warm_start) and polls warm_progress, drawing progress on stderr; the job
// stops if epochctl is interrupted (its connection ends).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/epochctl/ctl_client.h"
#include "tools/epochctl/path_list.h"

namespace epochfs::ctl {

struct WarmOptions {
  bool progress = true;  // draw progress on stderr (bar on a terminal)
  unsigned threads = 0;  // 0: the daemon's default
  double pollSeconds = 0.2;
};

// {"files", "files_total", "bytes", "bytes_total", "skipped", "errors",
//  "first_error", "seconds", "bytes_per_s"}.
nlohmann::json runWarm(CtlClient& client, const PathList& paths, const WarmOptions& options);
std::string formatWarm(const nlohmann::json& result);

// {"all", "tier", "files", "chunks", "bytes"}.
nlohmann::json runEvict(CtlClient& client, const PathList& paths, bool all,
                        const std::string& tier);
std::string formatEvict(const nlohmann::json& result);

}  // namespace epochfs::ctl
