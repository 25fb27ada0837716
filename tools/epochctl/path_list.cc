#include "tools/epochctl/path_list.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "fusefs/admin_protocol.h"

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

json PathList::encode(const std::string& raw) {
  return admin::isValidUtf8(raw) ? json(raw) : json{{"b64", admin::base64Encode(raw)}};
}

std::string PathList::display(const json& field) {
  std::string s = "?";
  if (field.is_string()) {
    s = field.get<std::string>();
  } else if (field.is_object() && field.contains("b64") && field["b64"].is_string()) {
    admin::base64Decode(field["b64"].get<std::string>(), &s);
  }
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

void PathList::sendBatches(CtlClient& client, const json& base,
                           const std::function<void(const json&)>& onReply) const {
  constexpr size_t kBatchBytes = admin::kMaxMessageBytes - 1024;
  json batch = json::array();
  size_t bytes = 0;
  auto flush = [&] {
    json req = base;
    req["paths"] = std::move(batch);
    onReply(client.call(req));
    batch = json::array();
    bytes = 0;
  };
  for (const auto& p : paths_) {
    json e = encode(p);
    const size_t n = e.dump(-1, ' ', false, json::error_handler_t::replace).size() + 1;
    if (n > kBatchBytes) throw CtlError("path too long: " + p.substr(0, 80) + "...");
    if (bytes + n > kBatchBytes) flush();
    batch.push_back(std::move(e));
    bytes += n;
  }
  if (!batch.empty() || paths_.empty()) flush();
}

}  // namespace epochfs::ctl
