// The declarations of a mount's counters (MetricRegistry): one line each for
// every value of `status`/`stats` that is a number, and the Prometheus family
// it is exported as. docs/METRICS.md explains them; the golden list
// tests/integration/golden/admin_names.txt pins their names. A new counter is
// one declaration here (or in cluster_metrics.cc): `stats --json`,
// `epochctl metrics`, `epochctl stats` and the `schema` reply show it.
// Thread-safety: call before the admin server starts (MetricRegistry::add).
#pragma once

#include <chrono>

#include "cache/status.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/admin/cache_commands.h"
#include "fusefs/admin/metric_registry.h"
#include "fusefs/admin/namespace_refresher.h"

namespace epochfs::fusefs {

struct MountState;

// What the mount's declarations read; every part outlives the registry's use.
struct MountMetricSources {
  const MountState& mount;
  const NamespaceRefresher& refresher;
  const WarmCounters& warm;
  const EvictCounters& evict;
  const AdminServerCounters* admin = nullptr;  // null: no admin counters
};

// Everything but the cluster: tiers, source, reads, prefetch, warm/evict,
// memory, admin socket; `status`'s uptime, version and dataset.
cache::Status declareMountMetrics(MetricRegistry& registry, const MountMetricSources& sources);

double secondsSince(std::chrono::steady_clock::time_point t);

}  // namespace epochfs::fusefs
