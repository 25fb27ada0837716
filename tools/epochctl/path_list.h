// PathList: the paths a command names (arguments or `--list FILE`, one per
// line, `-` for stdin), made relative to the mount the way a user means them
// (an absolute path inside the mountpoint loses that prefix; "./x" and "x/"
// become "x"; "." is the root) — anything else is sent as given and the
// daemon refuses it. Names that are not UTF-8 travel as {"b64": ...}.
// Sends them in batches that each fit one admin message.
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/epochctl/ctl_client.h"

namespace epochfs::ctl {

class PathList {
 public:
  explicit PathList(const std::string& mountpoint);

  void add(const std::string& userPath);
  void addLines(std::istream& in);
  // A file of paths, or "-" for stdin.
  void addFromFile(const std::string& file);

  const std::vector<std::string>& paths() const { return paths_; }
  bool empty() const { return paths_.empty(); }

  // Sends base + {"paths": batch} for every batch under the message cap and
  // hands each reply to onReply.
  void sendBatches(CtlClient& client, const nlohmann::json& base,
                   const std::function<void(const nlohmann::json&)>& onReply) const;

  // A path field of a reply (tools/admin_client/path_field.h), for display (b64 names decoded,
  // control bytes shown as '?').
  static std::string display(const nlohmann::json& field);

 private:
  std::string mount_;  // canonical mountpoint
  std::vector<std::string> paths_;
};

}  // namespace epochfs::ctl
