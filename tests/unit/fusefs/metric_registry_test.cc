// MetricRegistry: one declaration gives the JSON of a reply, the Prometheus
// family and epochctl's table (the `schema` reply rendered by CounterTable);
// a name declared twice, or a family declared two ways, is refused.
#include "fusefs/admin/metric_registry.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tools/epochctl/counter_table.h"

namespace epochfs::fusefs {
namespace {

using nlohmann::json;

MetricSpec spec(std::string path, MetricKind kind, std::string family = "",
                std::vector<std::pair<std::string, std::string>> labels = {}) {
  MetricSpec s;
  s.path = std::move(path);
  s.kind = kind;
  s.unit = "bytes";
  s.family = std::move(family);
  s.help = "Help for " + (s.family.empty() ? s.path : s.family) + ".";
  s.labels = std::move(labels);
  return s;
}

TEST(MetricRegistry, ACounterAddedOnceAppearsInTheJsonThePrometheusTextAndEpochctlsTable) {
  MetricRegistry r;
  std::atomic<uint64_t> frobs{3 << 20};
  MetricSpec s;
  s.path = "stats.widgets.frob_bytes";
  s.kind = MetricKind::kCounter;
  s.unit = "bytes";
  s.help = "Bytes the widgets frobbed.";
  s.family = "epochfs_widget_frob_bytes_total";
  ASSERT_TRUE(r.add(s, [&frobs] { return frobs.load(); }).isOk());

  const json stats = r.snapshot("stats");
  EXPECT_EQ(stats["widgets"]["frob_bytes"], 3u << 20);
  EXPECT_TRUE(r.snapshot("status").empty());

  const std::string text = r.prometheus({{"mountpoint", "/mnt/a"}});
  EXPECT_NE(text.find("# HELP epochfs_widget_frob_bytes_total Bytes the widgets frobbed.\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE epochfs_widget_frob_bytes_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("epochfs_widget_frob_bytes_total{mountpoint=\"/mnt/a\"} 3145728\n"),
            std::string::npos)
      << text;

  // The schema travels as JSON: what epochctl receives.
  const json schema = json::parse(r.schema().dump());
  ASSERT_EQ(schema.size(), 1u);
  EXPECT_EQ(schema[0]["family"], "epochfs_widget_frob_bytes_total");
  const std::string table = ctl::CounterTable(schema, "stats").render(stats);
  EXPECT_NE(table.find("widgets"), std::string::npos) << table;
  EXPECT_NE(table.find("frob_bytes"), std::string::npos) << table;
  EXPECT_NE(table.find("3.0 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("Bytes the widgets frobbed."), std::string::npos) << table;
  EXPECT_NE(ctl::CounterTable(schema, "stats").describe().find("epochfs_widget_frob_bytes_total"),
            std::string::npos);
}

TEST(MetricRegistry, RefusesAPathDeclaredTwiceOrInsideAnother) {
  MetricRegistry r;
  ASSERT_TRUE(r.add(spec("stats.a.b", MetricKind::kGauge), [] { return 1; }).isOk());
  EXPECT_FALSE(r.add(spec("stats.a.b", MetricKind::kGauge), [] { return 2; }).isOk());
  EXPECT_FALSE(r.add(spec("stats.a.b.c", MetricKind::kGauge), [] { return 2; }).isOk());
  EXPECT_FALSE(r.add(spec("stats.a", MetricKind::kGauge), [] { return 2; }).isOk());
  EXPECT_TRUE(r.add(spec("stats.a.bc", MetricKind::kGauge), [] { return 2; }).isOk());
}

TEST(MetricRegistry, RefusesMalformedDeclarations) {
  MetricRegistry r;
  const auto one = [] { return 1; };
  EXPECT_FALSE(r.add(spec("stats", MetricKind::kGauge), one).isOk()) << "no key";
  EXPECT_FALSE(r.add(spec("stats..x", MetricKind::kGauge), one).isOk()) << "empty key";
  EXPECT_FALSE(r.add(spec("stats.X", MetricKind::kGauge), one).isOk()) << "upper case";
  EXPECT_FALSE(r.add(spec("stats.x", MetricKind::kGauge), nullptr).isOk()) << "no value";
  EXPECT_FALSE(r.add(spec("stats.x", MetricKind::kCounter, "epochfs_x"), one).isOk())
      << "a counter family ends in _total";
  EXPECT_FALSE(r.add(spec("stats.y", MetricKind::kGauge, "epochfs_y_total"), one).isOk())
      << "only counters end in _total";
  EXPECT_FALSE(r.add(spec("stats.z", MetricKind::kGauge, "epochfs z"), one).isOk());
  EXPECT_FALSE(r.add(spec("stats.h", MetricKind::kHistogram, "epochfs_h"), one).isOk())
      << "a histogram needs addHistogram";
  MetricSpec noHelp = spec("stats.w", MetricKind::kGauge);
  noHelp.help.clear();
  EXPECT_FALSE(r.add(noHelp, one).isOk());
  EXPECT_TRUE(r.schema().empty());
}

TEST(MetricRegistry, OneFamilyHasOneKindOneHelpOneLabelSetAndDistinctSamples) {
  MetricRegistry r;
  const auto one = [] { return 1; };
  ASSERT_TRUE(
      r.add(spec("stats.ram.hits", MetricKind::kCounter, "epochfs_hits_total", {{"tier", "ram"}}),
            one)
          .isOk());
  MetricSpec otherHelp =
      spec("stats.disk.hits", MetricKind::kCounter, "epochfs_hits_total", {{"tier", "disk"}});
  otherHelp.help = "Something else.";
  EXPECT_FALSE(r.add(otherHelp, one).isOk());
  EXPECT_FALSE(
      r.add(spec("stats.disk.hits", MetricKind::kCounter, "epochfs_hits_total", {{"kind", "disk"}}),
            one)
          .isOk())
      << "another label key";
  EXPECT_FALSE(
      r.add(spec("stats.ram2.hits", MetricKind::kCounter, "epochfs_hits_total", {{"tier", "ram"}}),
            one)
          .isOk())
      << "the same sample twice";
  ASSERT_TRUE(
      r.add(spec("stats.disk.hits", MetricKind::kCounter, "epochfs_hits_total", {{"tier", "disk"}}),
            [] { return 7; })
          .isOk());
  const std::string text = r.prometheus({});
  EXPECT_EQ(text,
            "# HELP epochfs_hits_total Help for epochfs_hits_total.\n"
            "# TYPE epochfs_hits_total counter\n"
            "epochfs_hits_total{tier=\"ram\"} 1\n"
            "epochfs_hits_total{tier=\"disk\"} 7\n");
}

TEST(MetricRegistry, TablesInfoValuesAndHistograms) {
  MetricRegistry r;
  MetricSpec rows = spec("stats.streams", MetricKind::kInfo);
  MetricSpec column =
      spec("stats.streams[].hits", MetricKind::kCounter, "epochfs_stream_hits_total");
  column.rowLabel = "rank";
  EXPECT_FALSE(r.addColumn(column).isOk()) << "its table is not declared yet";
  ASSERT_TRUE(r.add(rows, [] {
                 return json::array({{{"rank", 0}, {"hits", 5}}, {{"rank", 1}, {"hits", 9}}});
               }).isOk());
  ASSERT_TRUE(r.addColumn(column).isOk());
  ASSERT_TRUE(r.add(spec("status.version", MetricKind::kInfo, "epochfs_info"), [] {
                 return "1.2\"3";
               }).isOk());
  MetricSpec lat = spec("stats.latency_us", MetricKind::kHistogram, "epochfs_latency_seconds");
  ASSERT_TRUE(r.addHistogram(
                   lat,
                   [] {
                     return json{{"p50", 4}};
                   },
                   [] {
                     return std::vector<std::pair<double, uint64_t>>{{0.5, 2}, {1, 3}};
                   })
                  .isOk());

  EXPECT_EQ(r.snapshot("stats")["streams"][1]["hits"], 9);
  EXPECT_EQ(r.snapshot("stats")["latency_us"]["p50"], 4);
  EXPECT_EQ(r.snapshot("status")["version"], "1.2\"3");
  const std::string text = r.prometheus({{"mountpoint", "/m"}});
  EXPECT_NE(text.find("epochfs_stream_hits_total{mountpoint=\"/m\",rank=\"1\"} 9\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE epochfs_info gauge\n"
                      "epochfs_info{mountpoint=\"/m\",version=\"1.2\\\"3\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE epochfs_latency_seconds histogram\n"
                      "epochfs_latency_seconds_bucket{mountpoint=\"/m\",le=\"0.5\"} 2\n"
                      "epochfs_latency_seconds_bucket{mountpoint=\"/m\",le=\"1\"} 3\n"
                      "epochfs_latency_seconds_bucket{mountpoint=\"/m\",le=\"+Inf\"} 3\n"
                      "epochfs_latency_seconds_count{mountpoint=\"/m\"} 3\n"),
            std::string::npos)
      << text;
}

TEST(MetricRegistry, ANullValueIsLeftOutOfTheExposition) {
  MetricRegistry r;
  ASSERT_TRUE(r.add(spec("stats.epoch", MetricKind::kGauge, "epochfs_epoch"), [] {
                 return json(nullptr);
               }).isOk());
  EXPECT_EQ(r.prometheus({}),
            "# HELP epochfs_epoch Help for epochfs_epoch.\n# TYPE epochfs_epoch gauge\n");
  EXPECT_TRUE(r.snapshot("stats")["epoch"].is_null());
}

}  // namespace
}  // namespace epochfs::fusefs
