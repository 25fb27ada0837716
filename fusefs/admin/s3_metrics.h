// The counters of an s3:// mount (stats.s3.*, the epochfs_s3_* families):
// what the object store was asked, the retries, throttling answers, timeouts,
// credential reloads and the GET latency of transport/s3's S3Client
// (S3ClientCounters). Declared by declareMountMetrics for an s3:// mount only,
// so a POSIX mount's names (tests/integration/golden/admin_names.txt) do not
// change; docs/METRICS.md explains each.
// Thread-safety: as MetricRegistry::add (before the admin server starts).
#pragma once

#include "fusefs/admin/metric_declarations.h"

namespace epochfs::transport::s3 {
struct S3ClientCounters;
}  // namespace epochfs::transport::s3

namespace epochfs::fusefs {

// `counters` outlives the registry's use.
void declareS3Metrics(MetricDeclarations& d, const transport::s3::S3ClientCounters& counters);

}  // namespace epochfs::fusefs
