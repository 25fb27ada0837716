// `epochctl order`: registers an epoch's read order with a mount, streamed in
// messages under the protocol's 64 KiB cap (an ImageNet order is megabytes).
#pragma once

#include <cstdint>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/epochctl/ctl_client.h"

namespace epochfs::ctl {

struct OrderRequest {
  int64_t epoch = 0;
  int rank = 0;
  uint64_t start = 0;
};

// Streams the entries of `in` (one per line: a path relative to the mount,
// optionally "path@OFFSET+LENGTH") and commits; returns the commit reply.
nlohmann::json sendOrder(CtlClient& client, const OrderRequest& request, std::istream& in);

}  // namespace epochfs::ctl
