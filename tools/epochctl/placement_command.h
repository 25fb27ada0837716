// `epochctl placement MNT [--json]`: the placement map of a clustered mount,
// the owner node id of every regular file (-1: no live owner) and the map's
// version (it names the live member set; ranks compare it per epoch). The
// daemon pages the map under the message cap; the pages are joined here, and
// the whole map is read again if the version changes in between.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/epochctl/ctl_client.h"

namespace epochfs::ctl {

// {"version", "self", "total", "entries": [[path, owner]...]} (paths as the
// admin protocol encodes them: a string, or {"b64": ...}).
nlohmann::json runPlacement(CtlClient& client);
// "map version V: N files; node 0: n files, ..." (one line per owner).
std::string formatPlacement(const nlohmann::json& map);

}  // namespace epochfs::ctl
