// An s3:// mount's counters (fusefs/admin/s3_metrics.h): the stats JSON and
// the Prometheus families read the client's live counters.
#include "fusefs/admin/s3_metrics.h"

#include <gtest/gtest.h>

#include "fusefs/admin/metric_registry.h"
#include "transport/s3/s3_client_counters.h"

namespace epochfs::fusefs {
namespace {

TEST(S3Metrics, StatsAndPrometheusReadTheLiveCounters) {
  transport::s3::S3ClientCounters c;
  MetricRegistry registry;
  MetricDeclarations d(registry);
  declareS3Metrics(d, c);
  ASSERT_TRUE(d.status().isOk()) << d.status().message();
  c.gets = 7;
  c.retries = 3;
  c.slowdowns = 2;
  c.timeouts = 1;
  c.credentialReloads = 1;
  c.getLatency.record(1500);  // 1.5 ms
  const nlohmann::json s3 = registry.snapshot("stats")["s3"];
  EXPECT_EQ(s3["requests"]["get"], 7);
  EXPECT_EQ(s3["retries"], 3);
  EXPECT_EQ(s3["slowdowns"], 2);
  EXPECT_EQ(s3["timeouts"], 1);
  EXPECT_EQ(s3["credential_reloads"], 1);
  EXPECT_EQ(s3["get_latency_us"]["p50"], 2048);
  const std::string text = registry.prometheus({{"mountpoint", "/mnt"}});
  for (const char* sample : {"epochfs_s3_requests_total{mountpoint=\"/mnt\",method=\"get\"} 7",
                             "epochfs_s3_retries_total{mountpoint=\"/mnt\"} 3",
                             "epochfs_s3_slowdowns_total{mountpoint=\"/mnt\"} 2",
                             "epochfs_s3_timeouts_total{mountpoint=\"/mnt\"} 1",
                             "epochfs_s3_credential_reloads_total{mountpoint=\"/mnt\"} 1",
                             "epochfs_s3_get_latency_seconds_count{mountpoint=\"/mnt\"} 1"}) {
    EXPECT_NE(text.find(sample), std::string::npos) << sample << "\n" << text;
  }
}

}  // namespace
}  // namespace epochfs::fusefs
