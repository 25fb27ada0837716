// CounterTable: `epochctl stats`' counters rendered from the daemon's own
// declarations (the `schema` reply, fusefs/admin/metric_registry.h), so a counter
// the daemon adds shows here without a change to epochctl — also for an
// older epochctl talking to a newer daemon after `epochctl upgrade`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace epochfs::ctl {

class CounterTable {
 public:
  // `schema`: the reply's "metrics" array; `command`: whose reply `values` is.
  CounterTable(nlohmann::json schema, std::string command);

  // Every declared counter and gauge of `values` that is not 0, one line
  // each, grouped by section: "  tiers.ram    hit_bytes    1.2 GiB  help".
  std::string render(const nlohmann::json& values) const;
  // The declarations themselves (`epochctl stats --schema`).
  std::string describe() const;
  // A value in its unit: bytes as KiB/MiB/..., seconds with one decimal.
  static std::string formatValue(const nlohmann::json& value, const std::string& unit);

 private:
  nlohmann::json schema_;
  std::string command_;
};

}  // namespace epochfs::ctl
