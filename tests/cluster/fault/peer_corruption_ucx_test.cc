// docs/RELIABILITY.md case 4 (and the forged-payload part of 14), in-process
// over real UCX: one node of three corrupts every chunk it serves (the
// TEST-ONLY fault hook, transport/peer_fault.h). The asker must detect each
// corruption with the check the mode targets, take the bytes from the other
// replica, mark the liar suspect after 3 bad replies, stop asking it, try it
// again after the backoff, and back off twice as long the second time.
#include <gtest/gtest.h>

#include "tests/cluster/fault/in_process_cluster.h"

namespace epochfs::transport::testing {
namespace {

struct FlipCase {
  const char* name;
  PeerFault::Mode mode;
  bool mac;          // --peer-integrity mac (else checksum)
  bool caughtByMac;  // which check must catch it
};

class CorruptReplica : public ::testing::TestWithParam<FlipCase> {};

const PeerInfo& peerOf(const std::vector<PeerInfo>& v, uint32_t id) { return v.at(id); }

// Files node 0 must fetch whose best owner is node 2 and second owner node 1.
std::vector<uint64_t> filesOwnedBy2Then1(const Cluster& c, size_t n) {
  std::vector<uint64_t> out;
  for (uint64_t f = 1; out.size() < n && f < 100000; ++f) {
    const uint64_t id = f * 0x9e3779b97f4a7c15ull;
    const auto o = c.owners(id);
    if (o.size() == 2 && o[0] == 2 && o[1] == 1) out.push_back(id);
  }
  return out;
}

// Pass: (1) every fetch of a file owned by {2, 1} returns exactly the
// owner's bytes (served by node 1 after node 2's bad reply); (2) each bad
// reply is counted by the expected check and the other check counts none;
// node 0's count equals the chunks node 2 corrupted for it (nothing slipped
// through); (3) after 3 bad replies node 2 is suspect: not live, out of
// owners(), suspect_for_ms in (0, 1000], not asked (its served count does
// not move); (4) after the 1 s backoff it is up again, (5) three more bad
// replies make it suspect a second time for twice as long (> 1000 ms left).
TEST_P(CorruptReplica, DetectedServedByTheOtherReplicaThenSuspectWithBackoff) {
  const FlipCase fc = GetParam();
  auto m = loopbackMembers(3);
  auto tune = [&](bool liar) {
    return [&, liar](ClusterConfig& c) {
      c.replicas = 2;
      c.macPayloads = fc.mac;
      c.suspectAfter = 3;
      c.suspectFor = 1000ms;
      if (liar) c.fault = PeerFault{fc.mode, 1};
    };
  };
  auto n0 = startNode(m, 0, tune(false));
  auto n1 = startNode(m, 1, tune(false));
  auto n2 = startNode(m, 2, tune(true));
  for (auto* n : {n0.get(), n1.get(), n2.get()}) {
    ASSERT_TRUE(waitFor([&] { return liveCount(*n->cluster) == 3; }, 10s));
  }
  Cluster& asker = *n0->cluster;
  const auto files = filesOwnedBy2Then1(asker, 6);
  ASSERT_EQ(files.size(), 6u);

  auto fetchRight = [&](uint64_t f, uint64_t size) {
    auto id = identityOf(f, size);
    auto r = asker.fetch("f", id, cache::ChunkKey::make(1, f, 0));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ((*r)->data, bytesFor(f, 0, size)) << "wrong bytes for file " << f;
  };
  auto badCount = [&](bool mac) {
    const auto p = peerOf(asker.peers(), 2);
    return mac ? p.macFailures : p.checksumFailures;
  };
  auto suspectNow = [&] { return peerOf(asker.peers(), 2).state == "suspect"; };

  // Round 1: sizes on both sides of UCX's rendezvous threshold.
  for (size_t i = 0; i < 3; ++i) fetchRight(files[i], i % 2 ? 3000 : (512 << 10));
  EXPECT_EQ(badCount(fc.caughtByMac), 3u);
  EXPECT_EQ(badCount(!fc.caughtByMac), 0u);
  EXPECT_EQ(peerOf(asker.peers(), 1).fetches, 3u) << "node 1 served what node 2 spoiled";
  ASSERT_TRUE(waitFor(suspectNow, 2s)) << "node 2 not suspect after 3 bad replies";
  auto p2 = peerOf(asker.peers(), 2);
  EXPECT_FALSE(p2.live);
  EXPECT_EQ(p2.suspectCount, 1u);
  EXPECT_GT(p2.suspectForMs, 0u);
  EXPECT_LE(p2.suspectForMs, 1000u);
  EXPECT_NE(p2.lastError.find("suspect"), std::string::npos) << p2.lastError;
  // Not asked while suspect.
  const int servedBy2 = n2->served.load();
  for (uint64_t f : files) {
    for (uint32_t o : asker.owners(f)) EXPECT_NE(o, 2u);
  }
  fetchRight(files[3], 4000);
  EXPECT_EQ(n2->served.load(), servedBy2);

  // Tried again after the backoff.
  ASSERT_TRUE(waitFor([&] { return peerOf(asker.peers(), 2).state == "up"; }, 5s));
  for (size_t i = 4; i < 6; ++i) fetchRight(files[i], 100000);
  fetchRight(files[0] + 0, 7000);  // another chunk size of a file node 2 owns
  EXPECT_EQ(badCount(fc.caughtByMac), 6u);
  ASSERT_TRUE(waitFor(suspectNow, 2s)) << "node 2 not suspect again";
  p2 = peerOf(asker.peers(), 2);
  EXPECT_EQ(p2.suspectCount, 2u);
  EXPECT_GT(p2.suspectForMs, 1000u) << "the second suspicion must last longer";
  // Nothing slipped through: every chunk node 2 corrupted was caught.
  EXPECT_EQ(peerOf(n2->cluster->peers(), 0).faultsInjected, badCount(fc.caughtByMac));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, CorruptReplica,
    ::testing::Values(FlipCase{"WireFlipMac", PeerFault::Mode::kWire, true, true},
                      FlipCase{"MemoryFlipMac", PeerFault::Mode::kMemory, true, false},
                      FlipCase{"ForgedChecksumMac", PeerFault::Mode::kForge, true, true},
                      FlipCase{"WireFlipChecksumOnly", PeerFault::Mode::kWire, false, false},
                      FlipCase{"MemoryFlipChecksumOnly", PeerFault::Mode::kMemory, false, false}),
    [](const ::testing::TestParamInfo<FlipCase>& i) { return std::string(i.param.name); });

// Pass: with one owner (no replica) a corrupted reply is an error the cache
// turns into a source read: fetch() fails with Corruption, never returns the
// spoiled bytes.
TEST(CorruptOwner, WithoutReplicaTheFetchFailsSoTheCacheReadsTheSource) {
  auto m = loopbackMembers(2);
  auto n0 = startNode(m, 0);
  auto n1 = startNode(m, 1, [](ClusterConfig& c) {
    c.fault = PeerFault{PeerFault::Mode::kForge, 1};
  });
  ASSERT_TRUE(waitFor([&] { return liveCount(*n0->cluster) == 2; }, 10s));
  uint64_t f = 1;
  while (!n0->cluster->ownedElsewhere(f)) ++f;
  auto r = n0->cluster->fetch("f", identityOf(f, 20000), cache::ChunkKey::make(1, f, 0));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), cache::Status::Code::kCorruption) << r.status().toString();
  EXPECT_EQ(n0->cluster->peers()[1].macFailures, 1u);
}

}  // namespace
}  // namespace epochfs::transport::testing
