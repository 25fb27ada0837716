// The cluster's declared values: `status.members` (cluster mode only).
// Thread-safety: as MetricRegistry::add (before the admin server starts).
#pragma once

#include "cache/status.h"
#include "fusefs/admin/metric_registry.h"
#include "transport/cluster.h"

namespace epochfs::fusefs {

// Live and suspect peers, bad payloads, refused requests, whether the dataset
// fits, summed over the peers; `cluster` outlives the registry's use.
cache::Status declareClusterMetrics(MetricRegistry& registry, const transport::Cluster& cluster);

}  // namespace epochfs::fusefs
