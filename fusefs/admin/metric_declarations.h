// MetricDeclarations: a compact way to declare many values on a
// MetricRegistry (mount_metrics.cc, cluster_metrics.cc): each call adds one,
// the first refusal is kept and later calls do nothing, status() says it.
// Thread-safety: as MetricRegistry::add (before the admin server starts).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cache/cache_stats.h"
#include "cache/status.h"
#include "fusefs/admin/metric_registry.h"

namespace epochfs::fusefs {

class MetricDeclarations {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  explicit MetricDeclarations(MetricRegistry& r) : r_(r) {}
  // `family` "" keeps the value JSON only.
  void operator()(std::string path, MetricKind kind, std::string unit, std::string help,
                  MetricRegistry::Value value, std::string family = "", Labels labels = {}) {
    if (status_.isOk())
      status_ = r_.add(spec(std::move(path), kind, std::move(unit), std::move(help),
                            std::move(family), std::move(labels)),
                       std::move(value));
  }
  void column(std::string path, MetricKind kind, std::string unit, std::string help,
              std::string family, std::string rowLabel) {
    MetricSpec s = spec(std::move(path), kind, std::move(unit), std::move(help), std::move(family));
    s.rowLabel = std::move(rowLabel);
    if (status_.isOk()) status_ = r_.addColumn(std::move(s));
  }
  void histogram(MetricSpec s, MetricRegistry::Value summary, MetricRegistry::Buckets buckets) {
    if (status_.isOk())
      status_ = r_.addHistogram(std::move(s), std::move(summary), std::move(buckets));
  }
  // A latency histogram (`lat` outlives the registry's use): JSON quantiles
  // p50/p90/p99 in us; Prometheus: the log2 buckets, [2^i, 2^(i+1)) us, in seconds.
  void latency(std::string path, std::string help, std::string family,
               const cache::LatencyHistogram& lat) {
    histogram(
        spec(std::move(path), MetricKind::kHistogram, "seconds", std::move(help),
             std::move(family)),
        [&lat] {
          return nlohmann::json{{"p50", lat.quantileMicros(0.5)},
                                {"p90", lat.quantileMicros(0.9)},
                                {"p99", lat.quantileMicros(0.99)}};
        },
        [&lat] {
          std::vector<std::pair<double, uint64_t>> out;
          uint64_t cumulative = 0;
          for (int i = 0; i < cache::LatencyHistogram::kBuckets; ++i) {
            cumulative += lat.counts[i].load(std::memory_order_relaxed);
            out.emplace_back(static_cast<double>(uint64_t{1} << (i + 1)) / 1e6, cumulative);
          }
          return out;
        });
  }
  cache::Status status() const { return status_; }

  static MetricSpec spec(std::string path, MetricKind kind, std::string unit, std::string help,
                         std::string family = "", Labels labels = {}) {
    MetricSpec s;
    s.path = std::move(path);
    s.kind = kind;
    s.unit = std::move(unit);
    s.help = std::move(help);
    s.family = std::move(family);
    s.labels = std::move(labels);
    return s;
  }

 private:
  MetricRegistry& r_;
  cache::Status status_ = cache::Status::ok();
};

}  // namespace epochfs::fusefs
