// docs/RELIABILITY.md case 4 (and 14's forged payload) with real daemons:
// node 2 of 3 runs with the TEST-ONLY EPOCHFS_FAULT_PEER_FLIP hook and
// corrupts every chunk it serves. Node 0 reads the whole dataset.
#include "tests/cluster/cluster_mount_fixture.h"

namespace epochfs::itest {
namespace {

struct DaemonFlipCase {
  const char* name;
  const char* spec;      // EPOCHFS_FAULT_PEER_FLIP of node 2
  bool checksumOnly;     // --peer-integrity checksum on every node
  const char* caughtBy;  // the peers counter that must count the bad replies
  const char* notBy;
};

class PeerCorruptionTest : public ClusterMountTest,
                           public ::testing::WithParamInterface<DaemonFlipCase> {};

// Pass: (1) every byte node 0 reads is right (node 2's files come from the
// source); (2) node 0 counts node 2's bad replies with the expected check
// only, at least 3, and exactly as many as node 2 corrupted for it (none
// slipped through); (3) right after the suspicion `epochctl peers` shows
// node 2 `suspect` with a backoff left and not live, the metrics show one
// suspect peer and the bad payloads; (4) node 2 is `up` again after the backoff.
TEST_P(PeerCorruptionTest, BadPayloadsAreCaughtReadElsewhereAndTheLiarTurnsSuspect) {
  const DaemonFlipCase c = GetParam();
  makeDataset(60);
  faultNode_ = 2;
  faultSpec_ = c.spec;
  std::vector<std::string> extra;
  if (c.checksumOnly) extra = {"--peer-integrity", "checksum"};
  ASSERT_TRUE(startCluster(3, 64 << 20, extra));
  nlohmann::json during;
  std::string metricsDuring;
  // Before each read until the first suspicion: look at `epochctl peers`.
  readEpoch(mnts_[0], 3, nullptr, [&](size_t) {
    if (!during.is_null()) return;
    auto j = admin("peers", mnts_[0]);
    if (j["peers"][2].value("suspect_count", uint64_t{0}) == 0) return;
    during = std::move(j);
    metricsDuring = admin("metrics", mnts_[0]).value("text", "");
  });
  ASSERT_FALSE(during.is_null()) << "node 2 never became suspect";
  const auto j = admin("peers", mnts_[0]);
  const auto& p2 = j["peers"][2];
  const uint64_t bad = p2.value(c.caughtBy, uint64_t{0});
  EXPECT_GE(bad, 3u) << p2.dump();
  EXPECT_EQ(p2.value(c.notBy, uint64_t{0}), 0u) << p2.dump();
  EXPECT_GE(p2.value("fetch_errors", uint64_t{0}), bad);
  EXPECT_GE(p2.value("suspect_count", uint64_t{0}), 1u) << p2.dump();
  const auto liar = admin("peers", mnts_[2]);
  EXPECT_EQ(liar["peers"][0].value("faults_injected", uint64_t{0}), bad)
      << "every corrupted chunk must be caught: " << liar.dump();

  const auto& seen = during["peers"][2];
  EXPECT_EQ(seen.value("state", ""), "suspect") << seen.dump();
  EXPECT_FALSE(seen.value("live", true));
  EXPECT_GT(seen.value("suspect_for_ms", uint64_t{0}), 0u) << seen.dump();
  const std::string label = "{mountpoint=\"" + mnts_[0] + "\"}";
  EXPECT_NE(metricsDuring.find("epochfs_peers_suspect" + label + " 1"), std::string::npos)
      << metricsDuring;
  EXPECT_NE(metricsDuring.find(
                "epochfs_peer_bad_payloads_total{mountpoint=\"" + mnts_[0] + "\",check=\"" +
                (std::string(c.caughtBy) == "mac_failures" ? "mac" : "checksum") + "\"}"),
            std::string::npos);
  EXPECT_GE(admin("status", mnts_[0])["members"].value(c.caughtBy, uint64_t{0}), bad);

  // Tried again later: up after the 5 s backoff (a hang detector's bound).
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (admin("peers", mnts_[0])["peers"][2].value("state", "") != "up" && Clock::now() < until) {
    usleep(100000);
  }
  EXPECT_EQ(admin("peers", mnts_[0])["peers"][2].value("state", ""), "up");
}

INSTANTIATE_TEST_SUITE_P(
    Modes, PeerCorruptionTest,
    ::testing::Values(DaemonFlipCase{"MemoryFlipCaughtByChecksum", "memory", false,
                                     "checksum_failures", "mac_failures"},
                      DaemonFlipCase{"ForgedPayloadCaughtByMac", "forge", false, "mac_failures",
                                     "checksum_failures"},
                      DaemonFlipCase{"WireFlipChecksumOnly", "wire", true, "checksum_failures",
                                     "mac_failures"}),
    [](const ::testing::TestParamInfo<DaemonFlipCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace epochfs::itest
