// The cluster holds the dataset at capacity (docs/CLUSTER.md "Capacity"): at
// the sizes users have (2,000 files log-normal around 110 KB, a third larger
// than one 128 KiB FUSE read; RAM per node at or below what the data needs;
// several nodes, several epochs), every file is read from the source once for
// the whole cluster and never again while the cluster's caches hold it. Source
// reads are counted outside the daemons (inotify opens; every file is one
// chunk, so one open is one source read of the file's bytes), the kernel page
// cache is dropped between epochs, and every byte read is checked. All at the
// default --peer-timeout: a source read beyond the expected ones fails the
// test unless a peer timed out in that epoch (the test then says so).
#include <cmath>

#include "tests/cluster/cluster_mount_fixture.h"

namespace epochfs::itest {
namespace {

class ClusterCapacityTest : public ClusterMountTest {
 protected:
  static constexpr int kFiles = 2000;

  void SetUp() override {
    ClusterMountTest::SetUp();
    readBuffer_ = 32 * 1024;  // several READs for a third of the files, as a loader's reads
  }

  // Sizes log-normal with median 100,000 bytes and sigma 0.5 (mean ~113 KB,
  // ~30 % over 128 KiB), at most one 1 MiB chunk each.
  void makeLogNormalDataset(int files) {
    std::mt19937_64 rng(2026);
    std::lognormal_distribution<double> size(std::log(100000.0), 0.5);
    for (int c = 0; c < 4; ++c) mkdirs(src_ + "/class" + std::to_string(c));
    for (int i = 0; i < files; ++i) {
      const size_t n = std::clamp<size_t>(static_cast<size_t>(size(rng)), 4096, (1 << 20) - 1);
      const std::string rel = "class" + std::to_string(i % 4) + "/img" + std::to_string(i) + ".bin";
      const std::string data = randomBytes(n, static_cast<uint64_t>(i) + 1);
      writeFile(src_ + "/" + rel, data);
      hashes_[rel] = xxh3(data);
      sizes_[rel] = n;
    }
    dataset_ = datasetBytes();
  }

  struct SourceReads {
    uint64_t bytes = 0;
    size_t opens = 0;
    size_t filesReadTwice = 0;
    std::string example;
  };
  SourceReads take(OpenCounter& opens) {
    SourceReads r;
    for (const auto& [file, n] : opens.take(src_)) {
      r.opens += static_cast<size_t>(n);
      r.bytes += sizes_[file] * static_cast<uint64_t>(n);
      if (n > 1) ++r.filesReadTwice;
      if (r.example.empty()) r.example = file;
    }
    return r;
  }

  // Peer request deadlines missed, summed over the nodes.
  uint64_t timeouts() {
    uint64_t n = 0;
    for (const auto& m : mnts_) {
      for (const auto& p : admin("peers", m).value("peers", nlohmann::json::array()))
        n += p.value("timeouts", uint64_t{0});
    }
    return n;
  }

  // Waits until every node has built the placement table of the full cluster
  // (transport/placement_builder.h: built off the progress thread).
  bool waitPlacementReady() {
    const auto until = Clock::now() + std::chrono::seconds(15);
    for (const auto& m : mnts_) {
      while (!admin("peers", m).value("placement_ready", false)) {
        if (Clock::now() > until) return false;
        usleep(20000);
      }
    }
    return true;
  }

  // Starts the cluster, checks that every live node's owned bytes are at most
  // 95 % of its capacity (the realized share fits), returns the owned bytes.
  std::vector<uint64_t> startAndCheckShares(int n, uint64_t ram,
                                            const std::vector<std::string>& extra) {
    if (!startCluster(n, ram, extra)) return {};
    EXPECT_TRUE(waitPlacementReady());
    std::vector<uint64_t> owned(static_cast<size_t>(n), 0);
    const auto peers = admin("peers", mnts_[0]);
    EXPECT_TRUE(peers.value("fits", false)) << peers.dump();
    for (const auto& p : peers["peers"]) {
      const uint64_t o = p.value("owned_bytes", uint64_t{0});
      const uint64_t cap = p.value("capacity_bytes", uint64_t{0});
      EXPECT_LE(static_cast<double>(o), 0.95 * static_cast<double>(cap)) << p.dump();
      owned[p.value("id", 0u)] = o;
      std::printf("node %u owns %.1f MiB of %.1f MiB capacity (%.0f %%)\n", p.value("id", 0u),
                  o / 1048576.0, cap / 1048576.0, 100.0 * o / std::max<uint64_t>(cap, 1));
    }
    return owned;
  }

  // One epoch through every mount, each node in its own shuffled order; then
  // the page cache is dropped. Returns what the source served.
  SourceReads epoch(OpenCounter& opens, int e, const std::function<void(size_t)>& onNode1 = {}) {
    std::vector<std::thread> ts;
    for (size_t i = 0; i < mnts_.size(); ++i) {
      ts.emplace_back([this, i, e, &onNode1] {
        readEpoch(mnts_[i], static_cast<uint64_t>(e) * 1000 + i, nullptr,
                  i == 1 ? onNode1 : std::function<void(size_t)>());
      });
    }
    for (auto& t : ts) t.join();
    EXPECT_TRUE(dropPageCache());
    return take(opens);
  }

  // A source read in an epoch that should have none fails the test, unless
  // a peer missed a deadline in it (that moves placement: reported).
  void expectNoSourceReads(const SourceReads& r, int e, uint64_t timeoutsDuring) {
    std::printf("epoch %d: %zu source opens, %.1f MiB; %llu peer timeouts\n", e, r.opens,
                r.bytes / 1048576.0, static_cast<unsigned long long>(timeoutsDuring));
    if (r.opens == 0) return;
    if (timeoutsDuring > 0) {
      std::printf("epoch %d: source reads explained by %llu peer timeouts\n", e,
                  static_cast<unsigned long long>(timeoutsDuring));
      return;
    }
    ADD_FAILURE() << r.opens << " source opens (" << r.bytes << " bytes) in epoch " << e
                  << " with no peer timeout, e.g. " << r.example;
  }

  // Epoch 1 reads the dataset from the source once (each file by one daemon,
  // `copies` with replicas) and epochs 2..last nothing.
  void expectCapacityHolds(int lastEpoch, unsigned copies = 1) {
    OpenCounter opens(sourceDirs());
    uint64_t t0 = timeouts();
    const SourceReads e1 = epoch(opens, 1);
    const uint64_t t1 = timeouts();
    std::printf("epoch 1: %zu source opens, %.1f MiB of %.1f MiB dataset; %llu peer timeouts\n",
                e1.opens, e1.bytes / 1048576.0, dataset_ / 1048576.0,
                static_cast<unsigned long long>(t1 - t0));
    if (t1 == t0) {
      EXPECT_LE(static_cast<double>(e1.bytes), 1.01 * copies * static_cast<double>(dataset_));
      if (copies == 1) {
        EXPECT_EQ(e1.filesReadTwice, 0u) << "e.g. " << e1.example;
      }
    }
    for (const auto& m : mnts_) {
      const auto s = stats(m);
      std::printf(
          "%s: RAM owned %.1f MiB (%llu evicted), guests %.1f MiB (%llu evicted)\n", m.c_str(),
          counter(s, "tiers.ram.owned.bytes").value_or(0) / 1048576.0,
          static_cast<unsigned long long>(counter(s, "tiers.ram.owned.evictions").value_or(0)),
          counter(s, "tiers.ram.guest.bytes").value_or(0) / 1048576.0,
          static_cast<unsigned long long>(counter(s, "tiers.ram.guest.evictions").value_or(0)));
    }
    for (int e = 2; e <= lastEpoch; ++e) {
      t0 = timeouts();
      const SourceReads r = epoch(opens, e);
      expectNoSourceReads(r, e, timeouts() - t0);
    }
  }

  std::map<std::string, uint64_t> sizes_;
  uint64_t dataset_ = 0;
  // Little prefetch memory, so that guests live mostly in the room the owned
  // chunks leave (the default, 1/16 of the memory limit, is more than this
  // whole dataset here).
  const std::vector<std::string> guestRoom_ = {"--prefetch-memory", "8M"};
};

// Pass: 4 daemons with RAM for a third of the dataset each (no disk tier):
// epoch 1 reads ≤ 1.01 D from the source, no file twice; epochs 2-3 read
// nothing; every byte is the source's (readEpoch checks each file's hash).
TEST_F(ClusterCapacityTest, FourNodesAtAThirdEachHoldTheDataset) {
  makeLogNormalDataset(kFiles);
  ASSERT_FALSE(startAndCheckShares(4, dataset_ / 3, guestRoom_).empty());
  expectCapacityHolds(3);
}

// Pass: the same with 8 daemons at a sixth of the dataset each.
TEST_F(ClusterCapacityTest, EightNodesAtASixthEachHoldTheDataset) {
  makeLogNormalDataset(kFiles);
  ASSERT_FALSE(startAndCheckShares(8, dataset_ / 6, guestRoom_).empty());
  expectCapacityHolds(3);
}

// Pass: nodes of different sizes, one with half the RAM of the others
// (cluster total 1.225 D): every node's owned bytes are at most 95 % of its
// capacity, and epochs 2-3 read nothing from the source.
TEST_F(ClusterCapacityTest, NodeWithHalfTheRamHoldsItsShare) {
  makeLogNormalDataset(kFiles);
  nodeRam_[3] = dataset_ * 175 / 1000;
  ASSERT_FALSE(startAndCheckShares(4, dataset_ * 35 / 100, guestRoom_).empty());
  expectCapacityHolds(3);
}

// Pass: a small RAM tier (16 MiB) and a disk tier for a third of the dataset
// on every node: owned chunks leave RAM for disk, never the node.
TEST_F(ClusterCapacityTest, RamPlusDiskHoldTheDataset) {
  makeLogNormalDataset(kFiles);
  for (int i = 0; i < 4; ++i) {
    nodeExtra_[i] = {"--cache-dir", root_ + "/cache" + std::to_string(i), "--disk-cache",
                     std::to_string(dataset_ / 3)};
  }
  ASSERT_FALSE(startAndCheckShares(4, 16 << 20, guestRoom_).empty());
  expectCapacityHolds(3);
}

// Pass: with --replicas 2 and RAM for 2/3 of the dataset per node, each file
// is read from the source at most once per owner in epoch 1, never after.
TEST_F(ClusterCapacityTest, TwoReplicasHoldTheDataset) {
  makeLogNormalDataset(kFiles);
  std::vector<std::string> extra = guestRoom_;
  extra.insert(extra.end(), {"--replicas", "2"});
  ASSERT_FALSE(startAndCheckShares(4, dataset_ * 2 / 3, extra).empty());
  expectCapacityHolds(3, 2);
}

// Pass: a worker SIGKILLed in the middle of epoch 2 is restarted empty by its
// supervisor and rejoins; over epochs 2-3 the cluster reads at most twice that
// node's share from the source (its files while it was away, and again once it
// owns them), and nothing in epoch 4.
TEST_F(ClusterCapacityTest, KilledWorkerRestartsEmptyAndRefillsItsShare) {
  makeLogNormalDataset(kFiles);
  const auto owned = startAndCheckShares(4, dataset_ / 3, guestRoom_);
  ASSERT_EQ(owned.size(), 4u);
  OpenCounter opens(sourceDirs());
  const SourceReads e1 = epoch(opens, 1);
  EXPECT_LE(static_cast<double>(e1.bytes), 1.01 * static_cast<double>(dataset_));
  const pid_t worker = daemonPid(mnts_[1]);
  ASSERT_GT(worker, 0);
  const SourceReads e2 = epoch(opens, 2, [&](size_t i) {
    if (i == static_cast<size_t>(kFiles / 2)) kill(worker, SIGKILL);
  });
  // The new worker rejoins: every node sees all four live again.
  ASSERT_TRUE(everyNodeSeesLive(4, std::chrono::seconds(30)));
  EXPECT_NE(daemonPid(mnts_[1]), worker) << "the supervisor did not start a new worker";
  EXPECT_TRUE(waitPlacementReady());
  const SourceReads e3 = epoch(opens, 3);
  std::printf("share of node 1: %.1f MiB; source: epoch 2 %.1f MiB, epoch 3 %.1f MiB\n",
              owned[1] / 1048576.0, e2.bytes / 1048576.0, e3.bytes / 1048576.0);
  EXPECT_LE(e2.bytes + e3.bytes, 2 * owned[1]);
  const uint64_t t0 = timeouts();
  const SourceReads e4 = epoch(opens, 4);
  expectNoSourceReads(e4, 4, timeouts() - t0);
}

// Pass: a cluster too small for the dataset (4 nodes × 0.2 D) says so
// (`peers` fits=false, `status`), and with each node's order registered (a
// distributed sampler: every node reads its own quarter, new each epoch)
// reads at most 0.25 D from the source in each epoch after the first.
TEST_F(ClusterCapacityTest, UndersizedClusterWithOrderReadsLittleAfterEpochOne) {
  makeLogNormalDataset(kFiles);
  ASSERT_TRUE(startCluster(4, dataset_ / 5, guestRoom_));
  ASSERT_TRUE(waitPlacementReady());
  EXPECT_FALSE(admin("peers", mnts_[0]).value("fits", true));
  EXPECT_FALSE(admin("status", mnts_[0])["members"].value("fits", true));
  std::vector<std::string> files;
  for (const auto& [rel, h] : hashes_) files.push_back(rel);
  OpenCounter opens(sourceDirs());
  for (int e = 1; e <= 3; ++e) {
    std::vector<std::string> order = files;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(static_cast<uint64_t>(e)));
    std::vector<std::thread> ts;
    for (size_t node = 0; node < mnts_.size(); ++node) {
      std::vector<std::string> mine;
      for (size_t i = node; i < order.size(); i += mnts_.size()) mine.push_back(order[i]);
      const std::string list = root_ + "/order-" + std::to_string(node);
      std::string text;
      for (const auto& f : mine) text += f + "\n";
      writeFile(list, text);
      ProcResult r = runProcess({std::string(EPOCHFS_BIN_DIR) + "/epochctl", "order", mnts_[node],
                                 "--epoch", std::to_string(e), list},
                                60);
      ASSERT_EQ(r.exitCode, 0) << r.describe();
      ts.emplace_back([this, node, mine] {
        for (const auto& f : mine) {
          ReadResult rr = readFile(mnts_[node] + "/" + f, readBuffer_);
          EXPECT_EQ(rr.err, 0) << f;
          EXPECT_EQ(xxh3(rr.data), hashes_[f]) << f << " differs";
        }
      });
    }
    for (auto& t : ts) t.join();
    EXPECT_TRUE(dropPageCache());
    const SourceReads r = take(opens);
    std::printf("undersized, epoch %d: %.1f MiB from the source (%.2f D)\n", e, r.bytes / 1048576.0,
                static_cast<double>(r.bytes) / dataset_);
    if (e > 1) {
      EXPECT_LE(static_cast<double>(r.bytes), 0.25 * static_cast<double>(dataset_));
    }
  }
}

}  // namespace
}  // namespace epochfs::itest
