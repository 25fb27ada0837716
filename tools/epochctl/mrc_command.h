// `epochctl mrc MOUNTPOINT [--order FILE]... [--epochs N] [--sizes LIST]
// [--points N] [--png FILE]`: the miss-ratio curve (tools/epochctl/mrc_model.h)
// of the registered orders (all ranks of this node, interleaved), or of the
// given order files (one per epoch, entries as for `epochctl order`, sizes
// from lstat through the mount). With fewer orders than --epochs (default:
// 2 when one order is known), later epochs are reshuffles of the last order
// (seeded, --seed), as a shuffling sampler's next epochs would be.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/epochctl/ctl_client.h"

namespace epochfs::ctl {

struct MrcOptions {
  std::vector<std::string> orderFiles;
  unsigned epochs = 0;  // 0: the orders given, at least 2
  uint64_t seed = 0;
  std::vector<uint64_t> sizes;  // empty: `points` sizes up to the distinct bytes
  unsigned points = 12;
  uint32_t chunkSize = 0;  // 0: the mount's
  std::string png;
};

// {"source", "chunk_size", "epochs", "entries", "accesses", "accessed_bytes",
//  "unique_bytes", "ram_capacity_bytes", "shard_partition" ("mount": the RAM
//  tier's own, from chunk_shards; "model_hash"; "unsharded"),
//  "points": [{"cache_bytes", "shards",
//  "lru": {"all", "warm"}, "order_aware": {...}, "belady": {...}}]}
nlohmann::json runMrc(CtlClient& client, const MrcOptions& options);
std::string formatMrc(const nlohmann::json& result);
// Draws the curve with /usr/bin/python3 + matplotlib.
void drawMrcPng(const nlohmann::json& result, const std::string& file);

}  // namespace epochfs::ctl
