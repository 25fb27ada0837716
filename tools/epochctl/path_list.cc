#include "tools/epochctl/path_list.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "fusefs/admin_protocol.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

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

bool PathList::validUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
    if (n == 9 || i + n >= s.size()) return false;  // bad lead byte or truncated
    for (size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n + 1;
  }
  return true;
}

std::string PathList::base64(const std::string& raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(raw[i])) << 16;
    if (i + 1 < raw.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(raw[i + 1])) << 8;
    if (i + 2 < raw.size()) v |= static_cast<unsigned char>(raw[i + 2]);
    out += kB64[v >> 18];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < raw.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < raw.size() ? kB64[v & 63] : '=';
  }
  return out;
}

std::string PathList::unbase64(const std::string& text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const char* p = c == '\0' ? nullptr : std::strchr(kB64, c);
    if (p == nullptr) break;
    acc = (acc << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

json PathList::encode(const std::string& raw) {
  return validUtf8(raw) ? json(raw) : json{{"b64", base64(raw)}};
}

std::string PathList::display(const json& field) {
  std::string s = field.is_string() ? field.get<std::string>()
                  : field.is_object() && field.contains("b64")
                      ? unbase64(field["b64"].get<std::string>())
                      : std::string("?");
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

void PathList::sendBatches(AdminClient& client, const json& base,
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
