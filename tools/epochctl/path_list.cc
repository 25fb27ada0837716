#include "tools/epochctl/path_list.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/entry_batch.h"
#include "tools/admin_client/path_field.h"

namespace epochfs::ctl {

using nlohmann::json;

PathList::PathList(const std::string& mountpoint) {
  char buf[PATH_MAX];
  mount_ = realpath(mountpoint.c_str(), buf) != nullptr ? std::string(buf) : mountpoint;
}

void PathList::add(const std::string& userPath) {
  std::string p = userPath;
  if (!p.empty() && p[0] == '/') {
    if (p == mount_) {
      p.clear();
    } else if (p.rfind(mount_ + "/", 0) == 0) {
      p = p.substr(mount_.size() + 1);
    }
  }
  while (p.rfind("./", 0) == 0) p.erase(0, 2);
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == ".") p.clear();
  paths_.push_back(std::move(p));
}

void PathList::addLines(std::istream& in) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) add(line);
  }
}

void PathList::addFromFile(const std::string& file) {
  if (file == "-") return addLines(std::cin);
  std::ifstream in(file);
  if (!in) throw CtlError("cannot read " + file + ": " + std::strerror(errno));
  addLines(in);
}

std::string PathList::display(const json& field) {
  std::string s;
  if (!admin::decodePath(field, &s)) return std::string(1, '?');
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

void PathList::sendBatches(CtlClient& client, const json& base,
                           const std::function<void(const json&)>& onReply) const {
  admin::EntryBatch batch;
  auto flush = [&] {
    json req = base;
    req["paths"] = batch.take();
    onReply(client.call(req));
  };
  for (const auto& p : paths_) {
    const json e = admin::encodePath(p);
    const auto added = batch.add(e);
    if (added == admin::EntryBatch::Added::kTooLarge) {
      throw CtlError("path too long: " + p.substr(0, 80) + "...");
    }
    if (added == admin::EntryBatch::Added::kFull) {
      flush();
      batch.add(e);
    }
  }
  if (!batch.empty() || paths_.empty()) flush();
}

}  // namespace epochfs::ctl
