// MetricsExporter: the Prometheus text exposition (format 0.0.4) of a mount's
// counters — `epochctl metrics` and GET /metrics on --metrics-port. Rendered
// from the same JSON as `status` and `stats` (one source of truth) plus the
// source-latency histogram. Every series carries a `mountpoint` label so the
// files of several mounts can sit side by side in a node exporter's textfile
// directory; no series or label ever names a dataset file (docs/METRICS.md).
// Thread-safety: render() is const and reentrant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cache/cache_stats.h"

namespace epochfs::fusefs {

class MetricsExporter {
 public:
  explicit MetricsExporter(std::string mountpoint) : mountpoint_(std::move(mountpoint)) {}

  std::string render(const nlohmann::json& status, const nlohmann::json& stats,
                     const cache::LatencyHistogram& sourceLatency) const;

  // Escapes a label value (\\, \" and \n).
  static std::string escapeLabel(const std::string& v);

 private:
  std::string mountpoint_;
};

}  // namespace epochfs::fusefs
