#include "tools/epochctl/order_command.h"

#include "fusefs/admin_protocol.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {

bool validUtf8(const std::string& s) {
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

std::string base64(const std::string& raw) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < raw.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(raw[i]) << 16;
    if (i + 1 < raw.size()) v |= static_cast<unsigned char>(raw[i + 1]) << 8;
    if (i + 2 < raw.size()) v |= static_cast<unsigned char>(raw[i + 2]);
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += i + 1 < raw.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < raw.size() ? k[v & 63] : '=';
  }
  return out;
}

}  // namespace

json sendOrder(AdminClient& client, const OrderRequest& request, std::istream& in) {
  client.call({{"cmd", admin::kCmdOrderBegin},
               {"epoch", request.epoch},
               {"rank", request.rank},
               {"start", request.start}});
  // Leave room for the envelope under the cap.
  constexpr size_t kBatchBytes = admin::kMaxMessageBytes - 1024;
  json batch = json::array();
  size_t batchBytes = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    json entry = validUtf8(line) ? json(line) : json{{"b64", base64(line)}};
    const size_t size = entry.dump().size() + 1;
    if (size > kBatchBytes) throw std::runtime_error("entry too long: " + line.substr(0, 80));
    if (batchBytes + size > kBatchBytes) {
      client.call({{"cmd", admin::kCmdOrderAppend}, {"entries", batch}});
      batch = json::array();
      batchBytes = 0;
    }
    batch.push_back(std::move(entry));
    batchBytes += size;
  }
  if (!batch.empty()) client.call({{"cmd", admin::kCmdOrderAppend}, {"entries", batch}});
  return client.call({{"cmd", admin::kCmdOrderCommit}});
}

}  // namespace epochfs::ctl
