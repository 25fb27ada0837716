// MetricRegistry: every counter, gauge and histogram a mount exports, declared
// once. A declaration (MetricSpec) says where the value sits in an admin reply
// (`stats.tiers.ram.hit_bytes`), its kind, unit and help, and the Prometheus
// family and labels it is exported as; a value function reads it live. From
// the declarations come the `status`/`stats` JSON (snapshot), the Prometheus
// exposition (prometheus) and the `schema` reply that epochctl renders its
// tables from (schema). A family's name, kind, help and label set are the
// names users' dashboards depend on: tests/integration/golden/admin_names.txt
// holds them and docs/METRICS.md explains each one.
//
// Three shapes beside plain values:
//   - a table: an info entry whose value is an array of objects (one row per
//     prefetch stream), and column entries `stats.prefetch.streams[].stalls`
//     with no value function of their own: each row is one sample, labelled
//     by the row's `rowLabel` key (`rank`);
//   - a histogram: its JSON value is a summary (quantiles) and its buckets
//     feed the Prometheus `_bucket`/`_count` series;
//   - an info entry with a family: exported as a gauge of 1 labelled with the
//     value (`epochfs_info{version="X.Y.Z"} 1`), the Prometheus info idiom.
//
// add() refuses a path declared twice, a path inside another's value, a family
// declared with another kind or help, a sample (family + labels) twice, a
// counter family not ending in `_total`: the daemon does not start with any of
// them (a silent replacement or a renamed key that exports 0 cannot happen).
// Thread-safety: add() before the admin server starts, then the reads
// (snapshot, prometheus, schema) are const and may run concurrently; value
// functions must be safe to call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cache/status.h"

namespace epochfs::fusefs {

enum class MetricKind { kCounter, kGauge, kHistogram, kInfo };

struct MetricSpec {
  // Where the value sits in a reply, the command first: `stats.read_bytes`,
  // `status.dataset.files`; a table column `stats.prefetch.streams[].hits`.
  std::string path;
  MetricKind kind = MetricKind::kCounter;
  std::string unit;  // bytes, chunks, files, requests, seconds, ... or ""
  std::string help;
  // The Prometheus family this value is a sample of; "" keeps it JSON only.
  std::string family;
  std::vector<std::pair<std::string, std::string>> labels;  // this sample's
  // Table columns: the row key(s) labelling each sample, comma-separated
  // ("job,rank": a stream is one job's rank).
  std::string rowLabel;
};

class MetricRegistry {
 public:
  using Value = std::function<nlohmann::json()>;
  // A histogram's cumulative buckets: (upper bound in the family's unit, count).
  using Buckets = std::function<std::vector<std::pair<double, uint64_t>>()>;

  cache::Status add(MetricSpec spec, Value value);
  // A table column: a row key of the table declared at the path before "[]".
  cache::Status addColumn(MetricSpec spec);
  cache::Status addHistogram(MetricSpec spec, Value summary, Buckets buckets);

  // The reply subtree of one command ("stats" -> {"read_bytes": ..., ...}).
  nlohmann::json snapshot(const std::string& command) const;
  // Every declaration: [{path, kind, unit, help, family, labels, row_label}].
  nlohmann::json schema() const;
  // The text exposition (format 0.0.4); `baseLabels` go on every sample.
  std::string prometheus(const std::vector<std::pair<std::string, std::string>>& baseLabels) const;

  static const char* kindName(MetricKind kind);
  // \\, \" and \n escaped, as label values need.
  static std::string escapeLabel(const std::string& v);

 private:
  struct Entry {
    MetricSpec spec;
    Value value;      // null for table columns
    Buckets buckets;  // histograms only
  };
  cache::Status check(const MetricSpec& spec, bool column) const;

  std::vector<Entry> entries_;
};

}  // namespace epochfs::fusefs
