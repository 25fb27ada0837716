#include "tools/epochctl/order_command.h"

#include "fusefs/admin_protocol.h"
#include "tools/epochctl/path_list.h"

namespace epochfs::ctl {

using nlohmann::json;

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
    json entry = PathList::encode(line);
    const size_t size = entry.dump().size() + 1;
    if (size > kBatchBytes) throw CtlError("entry too long: " + line.substr(0, 80));
    if (batchBytes + size > kBatchBytes) {
      client.call({{"cmd", admin::kCmdOrderAppend}, {"entries", batch}});
      batch = json::array();
      batchBytes = 0;
    }
    batch.push_back(std::move(entry));
    batchBytes += size;
  }
  if (!batch.empty()) client.call({{"cmd", admin::kCmdOrderAppend}, {"entries", batch}});
  return client.call({{"cmd", admin::kCmdOrderCommit}}, 120);
}

}  // namespace epochfs::ctl
