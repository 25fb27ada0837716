// `epochctl stats MOUNTPOINT --watch SECONDS [--count N]`: a compact live
// view, redrawn in place on a terminal (a block per interval otherwise):
// read rate, where this interval's bytes came from, hit ratio, source rate
// and latency, tier fill and eviction rate, prefetch lead and stalls. With
// --json, one JSON object per interval: {"stats": ..., "rates": ...}.
// Each poll is a fresh connection (the daemon closes idle ones).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace epochfs::ctl {

class StatsWatch {
 public:
  StatsWatch(std::string mountpoint, std::string socket, double seconds, long count, bool json);
  int run();

  // Per-second rates between two stats replies (docs/ADMIN.md).
  static nlohmann::json rates(const nlohmann::json& prev, const nlohmann::json& cur);
  static std::string render(const std::string& mountpoint, double every, const nlohmann::json& cur,
                            const nlohmann::json& rates);

 private:
  std::string mountpoint_, socket_;
  double seconds_;
  long count_;
  bool json_;
};

}  // namespace epochfs::ctl
