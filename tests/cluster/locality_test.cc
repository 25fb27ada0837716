// Locality-aware loading on a real cluster: `tools/bench/cluster-bench locality`
// starts 4 epochfs daemons on loopback (UCX tcp) and 8 torch ranks (2 per
// node, each reading an ImageFolder through its node's mount with a real
// DataLoader), and measures one epoch's network bytes from the daemons'
// counters for a plain DistributedSampler and for LocalityAwareSampler. The
// bench unmounts what it mounted; the fixture's TearDown unmounts anything
// left under the test's temp dir.
#include <unistd.h>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

class LocalityClusterTest : public MountTest {
 protected:
  bool haveTorch() {
    return access("/usr/bin/python3", X_OK) == 0 &&
           runProcess({"/usr/bin/python3", "-c", "import torch, torchvision"}, 60).exitCode == 0;
  }
  nlohmann::json runBench(const std::string& bench, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     std::string(EPOCHFS_SOURCE_DIR) + "/tools/bench/cluster-bench",
                                     bench,
                                     "--json",
                                     "--workdir",
                                     root_,
                                     "--bin",
                                     EPOCHFS_BIN_DIR};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcResult r = runProcess(argv, 300);
    if (r.exitCode != 0) {
      ADD_FAILURE() << r.describe();
      return nullptr;
    }
    std::printf("%s", r.err.c_str());  // the bench's progress lines
    return nlohmann::json::parse(r.out, nullptr, false);
  }
};

// Pass: at local batch 32 LocalityAwareSampler's bytes fetched from peers in
// one epoch are <= 10% of a plain DistributedSampler's on the same cluster
// (ratio of byte counts), every global batch equals the plain one as a set,
// the plain sampler's remote share is about (p-1)/p = 75% (the measurement
// sees the network), >= 90% of LocalityAwareSampler's reads (chunk pieces
// served to FUSE reads, daemon counters) find their data on the node, and no
// measured epoch reads the source.
TEST_F(LocalityClusterTest, RemoteBytesAtMostTenPercentOfDistributedSampler) {
  if (!haveTorch()) GTEST_SKIP() << "torch/torchvision not importable by /usr/bin/python3";
  const nlohmann::json j = runBench("locality", {"--files", "1536", "--local-batch", "32"});
  ASSERT_TRUE(j.is_object()) << "no JSON from the bench";
  const auto& plain = j["plain"];
  const auto& loc = j["locality"][0];
  const double plainRemote = plain["remote_bytes"].get<double>();
  const double locRemote = loc["remote_bytes"].get<double>();
  std::printf("plain remote %.0f B (%.1f %%), locality remote %.0f B (%.2f %%): %.1f %% of plain\n",
              plainRemote, 100 * plain["remote_fraction"].get<double>(), locRemote,
              100 * loc["remote_fraction"].get<double>(), 100 * locRemote / plainRemote);
  EXPECT_GT(plain["remote_fraction"].get<double>(), 0.65);
  EXPECT_LT(plain["remote_fraction"].get<double>(), 0.85);
  EXPECT_LE(locRemote, 0.10 * plainRemote);
  std::printf("locality: %.1f %% of %d reads on the node (plain sampler: %.1f %%)\n",
              100 * loc["local_read_fraction"].get<double>(),
              loc["local_reads"].get<int>() + loc["remote_reads"].get<int>(),
              100 * plain["local_read_fraction"].get<double>());
  EXPECT_GE(loc["local_read_fraction"].get<double>(), 0.90);
  EXPECT_GE(loc["local_reads"].get<int>() + loc["remote_reads"].get<int>(), 1536);
  EXPECT_TRUE(loc["global_batches_identical"].get<bool>());
  EXPECT_EQ(loc["bytes_read"], plain["bytes_read"]);
  EXPECT_EQ(loc["placement_versions"].size(), 1u) << "ranks used different placement maps";
  EXPECT_TRUE(j["epochctl_placement_matches"].get<bool>())
      << "`epochctl placement --json` differs from epochfs.admin.placement()";
  EXPECT_EQ(plain["source_bytes"], 0);
  EXPECT_EQ(loc["source_bytes"], 0);
}

// Pass: with an unchanged DistributedSampler (the daemons follow its order in
// the zero-change mode) and peer prefetch, >= 80% of the second epoch's reads
// (RAM tiers emptied of other nodes' copies and the page cache dropped before
// it) are served from the node itself (RAM, staging area or disk tier), not
// from a peer or the source; the network cost is reported and is real: the
// other nodes' share, about (p-1)/p = 75% of the bytes read, still crossed the
// network (> 60%), and nothing came from the source.
TEST_F(LocalityClusterTest, PeerPrefetchServesEightyPercentOfEpochTwoOnNode) {
  if (!haveTorch()) GTEST_SKIP() << "torch/torchvision not importable by /usr/bin/python3";
  const nlohmann::json j = runBench("peer-prefetch", {"--files", "1536"});
  ASSERT_TRUE(j.is_object()) << "no JSON from the bench";
  const auto& r = j["with_prefetch"];
  std::printf(
      "epoch 2: %.1f %% of %d reads on the node (%d from staging); peer bytes %.1f %% of "
      "the bytes read\n",
      100 * r["on_node_fraction"].get<double>(), r["reads"].get<int>(),
      r["reads_from_staging"].get<int>(), 100 * r["peer_bytes_fraction"].get<double>());
  EXPECT_GE(r["on_node_fraction"].get<double>(), 0.80);
  EXPECT_GE(r["reads"].get<int>(), 1536);
  EXPECT_GT(r["peer_bytes_fraction"].get<double>(), 0.60);
  EXPECT_EQ(r["reads_from_source"], 0);
}

}  // namespace
}  // namespace epochfs::itest
