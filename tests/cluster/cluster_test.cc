// Several epochfs daemons as separate processes on loopback (UCX_TLS=tcp, or
// shared memory), each with its own mountpoint and cache, over one source
// directory (the fixture: cluster_mount_fixture.h).
#include "tests/cluster/cluster_mount_fixture.h"

namespace epochfs::itest {
namespace {

TEST_F(ClusterMountTest, ThreeNodesReadEachFileOnceOverTcp) { runOnceEpochs(3, {}); }

TEST_F(ClusterMountTest, FourNodesReadEachFileOnceOverTcp) { runOnceEpochs(4, {}); }

TEST_F(ClusterMountTest, FourNodesOverSharedMemory) {
  setenv("UCX_TLS", "sm,self,tcp", 1);  // tcp for the connection manager only
  runOnceEpochs(4, {});
}

TEST_F(ClusterMountTest, ChecksumIntegrityMode) {
  runOnceEpochs(3, {"--peer-integrity", "checksum"});
}

TEST_F(ClusterMountTest, WrongSecretIsRefused) {
  makeDataset(40);
  ASSERT_TRUE(startCluster(3, 64 << 20, {}, /*wrongSecretNode=*/2));
  sleep(2);
  for (int i = 0; i < 3; ++i) {
    auto j = admin("peers", mnts_[static_cast<size_t>(i)]);
    for (const auto& p : j["peers"]) {
      const int id = p.value("id", -1);
      if (id == i) continue;
      const bool involvesIntruder = i == 2 || id == 2;
      EXPECT_EQ(p.value("live", false), !involvesIntruder) << "node " << i << ": " << p.dump();
      if (involvesIntruder) {
        EXPECT_GT(p.value("auth_failures", 0), 0) << "node " << i << ": " << p.dump();
      }
    }
  }
  // Everyone still reads the right bytes (the intruder from the source).
  epochEverywhere(7);
  for (int i = 0; i < 3; ++i) {
    auto j = admin("peers", mnts_[static_cast<size_t>(i)]);
    for (const auto& p : j["peers"]) {
      if (i == 2 || p.value("id", -1) == 2) {
        EXPECT_EQ(p.value("bytes_served", 0), 0);
        EXPECT_EQ(p.value("bytes_fetched", 0), 0);
      }
    }
  }
  std::ifstream log(root_ + "/log0");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("failed authentication"), std::string::npos) << text;
}

TEST_F(ClusterMountTest, KilledAndFrozenPeersLoseNoRead) {
  makeDataset(120);
  const double deadline = 1.0;
  // RAM for a third of the data: later epochs need the owners again.
  // --no-supervisor: the killed peer must stay dead (a supervisor would
  // restart it; tests/fault/supervisor_test.cc covers that).
  ASSERT_TRUE(startCluster(4, datasetBytes() / 3, {"--peer-timeout", "1000", "--no-supervisor"}));
  const pid_t victim = daemonPid(mnts_[3]), frozen = daemonPid(mnts_[2]);
  ASSERT_GT(victim, 0);
  ASSERT_GT(frozen, 0);
  double slowest0 = 0, slowest1 = 0;
  std::atomic<bool> struck{false};
  std::thread other([&] {
    while (!struck) usleep(1000);
    readEpoch(mnts_[1], 11, &slowest1);
  });
  readEpoch(mnts_[0], 10, &slowest0, [&](size_t i) {
    if (i == 40) {  // mid-epoch
      kill(victim, SIGKILL);
      kill(frozen, SIGSTOP);
      stopped_.push_back(frozen);
      struck = true;
    }
  });
  other.join();
  // Another epoch with both still gone.
  ASSERT_TRUE(dropPageCache());
  readEpoch(mnts_[0], 12, &slowest0);
  std::printf("slowest read: %.2f s (node 0), %.2f s (node 1)\n", slowest0, slowest1);
  // No read hangs beyond the deadline plus the source's time (a hang
  // detector, not a speed test).
  EXPECT_LT(std::max(slowest0, slowest1), deadline + 3.0);
  auto j = admin("peers", mnts_[0]);
  std::printf("%s\n", j.dump().c_str());
  EXPECT_FALSE(j["peers"][3].value("live", true));
  EXPECT_FALSE(j["peers"][2].value("live", true));
  kill(frozen, SIGCONT);
  // The frozen node answers again and rejoins.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!admin("peers", mnts_[0])["peers"][2].value("live", false) && Clock::now() < until) {
    usleep(100000);
  }
  EXPECT_TRUE(admin("peers", mnts_[0])["peers"][2].value("live", false));
  readEpoch(mnts_[1], 13, &slowest1);
  // The killed node's mount is dead (ENOTCONN); TearDown unmounts it.
  waitForExit(victim, 5);
}

// A member that nobody asks for data is still found frozen: every node probes
// the up members it has not heard from in 3.75-6.25 s (PeerHealth), and one
// that misses the probe's deadline turns suspect until it answers again.
TEST_F(ClusterMountTest, FrozenPeerNobodyAsksIsFoundByProbes) {
  makeDataset(40);
  ASSERT_TRUE(startCluster(3, datasetBytes(), {"--peer-timeout", "1000", "--no-supervisor"}));
  const pid_t frozen = daemonPid(mnts_[2]);
  ASSERT_GT(frozen, 0);
  kill(frozen, SIGSTOP);
  stopped_.push_back(frozen);
  // No reads: only a probe can find it (6.25 s + the 1 s deadline + a tick, with margin).
  auto until = Clock::now() + std::chrono::seconds(20);
  nlohmann::json peer;
  for (;;) {
    peer = admin("peers", mnts_[0])["peers"][2];
    if (!peer.value("live", true) || Clock::now() > until) break;
    usleep(200000);
  }
  EXPECT_EQ(peer.value("state", ""), "suspect") << peer.dump();
  EXPECT_EQ(peer.value("last_error", ""), "missed a probe") << peer.dump();
  EXPECT_TRUE(admin("peers", mnts_[0])["peers"][1].value("live", false))
      << "a member that answers its probes stays live";
  kill(frozen, SIGCONT);
  until = Clock::now() + std::chrono::seconds(10);
  while (!admin("peers", mnts_[0])["peers"][2].value("live", false) && Clock::now() < until) {
    usleep(100000);
  }
  EXPECT_TRUE(admin("peers", mnts_[0])["peers"][2].value("live", false)) << "it answers: live";
}

}  // namespace
}  // namespace epochfs::itest
