#include "tools/epochctl/placement_command.h"

#include <map>

#include "fusefs/admin_protocol.h"

namespace epochfs::ctl {

using nlohmann::json;

json runPlacement(CtlClient& client) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    json entries = json::array();
    json first;
    uint64_t start = 0;
    bool changed = false;
    for (;;) {
      json page = client.call({{"cmd", admin::kCmdPlacement}, {"start", start}, {"count", 100000}});
      if (first.is_null()) first = page;
      if (page.value("version", uint64_t{0}) != first.value("version", uint64_t{0})) {
        changed = true;  // the member set changed while paging: read it again
        break;
      }
      const json& got = page["entries"];
      for (const auto& e : got) entries.push_back(e);
      start += got.size();
      if (got.empty() || start >= page.value("total", uint64_t{0})) break;
    }
    if (changed) continue;
    return {{"version", first.value("version", uint64_t{0})},
            {"self", first.value("self", 0)},
            {"total", entries.size()},
            {"entries", std::move(entries)}};
  }
  throw CtlError("the cluster's member set kept changing while the map was read");
}

std::string formatPlacement(const json& map) {
  std::map<int64_t, uint64_t> perOwner;
  for (const auto& e : map["entries"]) perOwner[e[1].get<int64_t>()]++;
  std::string out = "map version " + std::to_string(map.value("version", uint64_t{0})) + ": " +
                    std::to_string(map.value("total", uint64_t{0})) + " files (this node is " +
                    std::to_string(map.value("self", 0)) + ")\n";
  for (const auto& [owner, n] : perOwner) {
    out += owner < 0 ? "  no live owner: " : "  node " + std::to_string(owner) + ": ";
    out += std::to_string(n) + " files\n";
  }
  return out;
}

}  // namespace epochfs::ctl
