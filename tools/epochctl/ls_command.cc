#include "tools/epochctl/ls_command.h"

#include <cstdio>
#include <sstream>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/path_field.h"
#include "tools/epochctl/formatting.h"

namespace epochfs::ctl {

using nlohmann::json;

json runLs(CtlClient& client, const PathList& paths, bool dirOnly) {
  json out = json::array();
  std::vector<std::string> all = paths.paths();
  if (all.empty()) all.push_back("");
  for (const auto& p : all) {
    json entry;
    json children = json::array();
    json offset = 0;
    while (!offset.is_null()) {
      json reply = client.call({{"cmd", admin::kCmdLs},
                                {"path", admin::encodePath(p)},
                                {"children", !dirOnly},
                                {"offset", offset}},
                               60);
      if (entry.is_null()) entry = reply["entry"];
      for (auto& c : reply["children"]) children.push_back(std::move(c));
      offset = reply["next_offset"];
    }
    if (!dirOnly && entry.value("type", "") == "dir") entry["children"] = std::move(children);
    out.push_back(std::move(entry));
  }
  return {{"paths", out}};
}

namespace {

void line(std::ostringstream& o, const json& e, const std::string& name) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%11s %7.1f%% %7.1f%% %7.1f%% %11s %8llu  %s\n",
                humanBytes(e.value("bytes", uint64_t{0})).c_str(), e.value("ram_pct", 0.0),
                e.value("disk_pct", 0.0), e.value("cached_pct", 0.0),
                humanBytes(e.value("not_cached_bytes", uint64_t{0})).c_str(),
                static_cast<unsigned long long>(e.value("files", uint64_t{0})), name.c_str());
  o << buf;
}

std::string nameOf(const json& e) {
  std::string n = PathList::display(e["path"]);
  if (e.value("type", "") == "dir" && n != ".") n += "/";
  return n;
}

}  // namespace

std::string formatLs(const json& result) {
  std::ostringstream o;
  char head[256];
  std::snprintf(head, sizeof head, "%11s %8s %8s %8s %11s %8s  %s\n", "size", "ram", "disk",
                "cached", "not cached", "files", "path");
  o << head;
  for (const json& e : result["paths"]) {
    if (e.contains("children")) {
      for (const json& c : e["children"]) {
        std::string n = PathList::display(c["path"]);
        const size_t slash = n.rfind('/');
        line(o, c,
             "  " + (slash == std::string::npos ? n : n.substr(slash + 1)) +
                 (c.value("type", "") == "dir" ? "/" : ""));
      }
    }
    line(o, e, nameOf(e) + (e.contains("children") ? " (total)" : ""));
    if (e.contains("unreadable_dirs")) {
      o << "  (" << e["unreadable_dirs"].get<uint64_t>()
        << " directories you may not read were left out)\n";
    }
  }
  return o.str();
}

}  // namespace epochfs::ctl
