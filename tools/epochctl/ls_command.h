// `epochctl ls MOUNTPOINT [PATH...] [-d]`: residency per file or directory —
// bytes in RAM / on disk / not cached, percentages for directories (a
// directory sums the regular files below it). A directory lists its entries
// unless -d. Pages through large directories (each reply under the cap).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/epochctl/ctl_client.h"
#include "tools/epochctl/path_list.h"

namespace epochfs::ctl {

// {"paths": [ENTRY + {"children": [ENTRY...]}...]} (docs/ADMIN.md).
nlohmann::json runLs(CtlClient& client, const PathList& paths, bool dirOnly);
std::string formatLs(const nlohmann::json& result);

}  // namespace epochfs::ctl
