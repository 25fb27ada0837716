#include "tools/epochctl/order_command.h"

#include "tools/admin_client/order_writer.h"
#include "tools/admin_client/path_field.h"

namespace epochfs::ctl {

using nlohmann::json;

json sendOrder(CtlClient& client, const OrderRequest& request, std::istream& in) {
  admin::OrderWriter order(client.client());
  valueOrThrow(order.begin(request.epoch, request.rank, request.start));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    valueOrThrow(order.append(admin::encodePath(line)));
  }
  return valueOrThrow(order.commit());
}

}  // namespace epochfs::ctl
