// NamespaceExchange over an in-process fabric (a fake Cluster per member that
// calls the other members' serve() directly): the tree, the pipelined pieces,
// a silent walker replaced after the bound, a corrupted image refused. The
// real transport and a killed walker: tests/cluster/namespace_exchange_test.cc.
#include "fusefs/daemon/namespace_exchange.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <thread>

#include "fusefs/daemon/namespace_handover.h"

namespace epochfs::fusefs {
namespace {

using cache::Result;
using cache::Status;

struct Fabric;

class FakeCluster final : public transport::Cluster {
 public:
  FakeCluster(Fabric& fabric, uint32_t self, size_t members) : fabric_(fabric) {
    cfg_.selfId = self;
    for (uint32_t i = 0; i < members; ++i) cfg_.members.push_back({i, "127.0.0.1", 1});
  }
  bool ownedElsewhere(uint64_t) const override { return false; }
  Result<cache::ChunkRef> fetch(const std::string&, const cache::FileIdentity&,
                                const cache::ChunkKey&) override {
    return Status::unavailable("not in this test");
  }
  std::vector<transport::PeerInfo> peers() const override;
  std::vector<uint32_t> owners(uint64_t) const override { return {}; }
  Fit fit() const override { return {}; }
  uint16_t listenPort() const override { return 0; }
  const transport::ClusterConfig& config() const override { return cfg_; }
  void setFiles(std::vector<transport::FileBytes>) override {}
  Result<cache::ChunkRef> fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                        uint32_t index) override;

 private:
  Fabric& fabric_;
  transport::ClusterConfig cfg_;
};

// The members' exchanges, and what the test does to them.
struct Fabric {
  std::vector<std::unique_ptr<FakeCluster>> clusters;
  std::vector<std::unique_ptr<NamespaceExchange>> exchanges;
  std::vector<std::atomic<bool>> down;
  std::atomic<int> flipPieceOf{-1};  // this member's image pieces arrive corrupted
  std::atomic<uint64_t> piecesServed{0};

  Fabric(size_t n, NamespaceExchange::Options o) : down(n) {
    for (uint32_t i = 0; i < n; ++i) {
      clusters.push_back(std::make_unique<FakeCluster>(*this, i, n));
      exchanges.push_back(std::make_unique<NamespaceExchange>(*clusters.back(), o));
    }
  }
};

std::vector<transport::PeerInfo> FakeCluster::peers() const {
  std::vector<transport::PeerInfo> out;
  for (uint32_t i = 0; i < cfg_.members.size(); ++i) {
    transport::PeerInfo p;
    p.id = i;
    p.state = i == cfg_.selfId ? "self" : fabric_.down[i] ? "down" : "up";
    out.push_back(p);
  }
  return out;
}

Result<cache::ChunkRef> FakeCluster::fetchFromNode(uint32_t node, const cache::FileIdentity& id,
                                                   uint32_t index) {
  if (fabric_.down[node]) return Status::unavailable("down");
  auto c = fabric_.exchanges[node]->serve(id, index);
  if (!c.isOk() || index == 0) return c;
  fabric_.piecesServed++;
  if (fabric_.flipPieceOf.load() != static_cast<int>(node)) return c;
  auto bytes = cache::ChunkBuffer::copyOf((*c)->data.data(), (*c)->data.size());
  bytes.data()[bytes.size() / 2] ^= 0x40;
  return cache::makeChunk((*c)->key, id, std::move(bytes));
}

// ~3,000 entries: an image of ~300 KB, many 16 KiB pieces.
DatasetNamespace makeNamespace(int tag) {
  std::vector<NamespaceEntry> entries;
  for (int d = 0; d < 30; ++d) {
    for (int f = 0; f < 100; ++f) {
      NamespaceEntry e;
      e.path = "train/n" + std::to_string(10000 + d) + "/img_" + std::to_string(f) + ".JPEG";
      e.attr.mode = S_IFREG | 0444;
      e.attr.size = static_cast<uint64_t>(1000 + f * 37 + tag);
      e.attr.mtimeNs = 1700000000000000000 + d;
      entries.push_back(std::move(e));
    }
  }
  NodeAttr dir;
  dir.mode = S_IFDIR | 0555;
  return std::move(DatasetNamespace::fromEntries(std::move(entries), dir)).value();
}

NamespaceExchange::Options fastOptions() {
  NamespaceExchange::Options o;
  o.fanOut = 2;
  o.stallBound = std::chrono::milliseconds(400);
  o.poll = std::chrono::milliseconds(5);
  o.pieceBytes = 16 << 10;
  return o;
}

struct Outcome {
  Result<DatasetNamespace> ns = Status::unavailable("not run");
  NamespaceExchange::Origin origin;
};

// Every member obtains at once; `walk(i, progress)` is member i's walk.
std::vector<Outcome> obtainAll(
    Fabric& fabric,
    const std::function<Result<DatasetNamespace>(uint32_t, std::atomic<uint64_t>*)>& walk,
    const std::vector<uint32_t>& members) {
  std::vector<Outcome> out(fabric.exchanges.size());
  std::vector<std::thread> threads;
  for (uint32_t i : members) {
    threads.emplace_back([&, i] {
      auto& x = *fabric.exchanges[i];
      out[i].ns = x.obtain(
          [&, i](std::atomic<uint64_t>* p) { return walk(i, p); },
          [](const DatasetNamespace& ns) { return NamespaceHandover::publish(ns, nullptr); },
          [](int fd, const std::string& fp) { return NamespaceHandover::adopt(fd, fp, nullptr); });
      out[i].origin = x.origin();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(NamespaceExchangeTest, OneWalkTheTreeRelaysPiecesAndEveryMemberGetsTheSameNamespace) {
  Fabric fabric(7, fastOptions());
  std::atomic<int> walks{0};
  auto out = obtainAll(fabric,
                       [&](uint32_t, std::atomic<uint64_t>* progress) {
                         walks++;
                         progress->store(10);
                         std::this_thread::sleep_for(std::chrono::milliseconds(100));
                         return Result<DatasetNamespace>(makeNamespace(0));
                       },
                       {0, 1, 2, 3, 4, 5, 6});
  EXPECT_EQ(walks.load(), 1);
  // Fan-out 2: 1,2 <- 0; 3,4 <- 1; 5,6 <- 2.
  const std::vector<uint32_t> parent = {0, 0, 0, 1, 1, 2, 2};
  for (uint32_t i = 0; i < 7; ++i) {
    ASSERT_TRUE(out[i].ns.isOk()) << i << ": " << out[i].ns.status().message();
    EXPECT_EQ(out[i].ns->fingerprint(), out[0].ns->fingerprint()) << i;
    EXPECT_EQ(out[i].ns->fileCount(), 3000u);
    EXPECT_EQ(out[i].origin.walked, i == 0);
    EXPECT_EQ(out[i].origin.parent, parent[i]) << i;
    EXPECT_EQ(out[i].origin.walker, 0u);
    EXPECT_TRUE(out[i].origin.countedOut.empty());
  }
  // Each of the 6 receivers took every piece once (none asked twice).
  const uint64_t pieces = (out[0].origin.imageBytes + (16 << 10) - 1) / (16 << 10);
  EXPECT_GT(pieces, 4u);
  EXPECT_EQ(fabric.piecesServed.load(), 6 * pieces);
}

// Member 0's walk stands still (a hung source): past the bound, member 1 walks
// and the others take its namespace; member 0's walk never ends here.
TEST(NamespaceExchangeTest, AWalkThatStandsStillIsReplacedAfterTheBound) {
  Fabric fabric(4, fastOptions());
  std::atomic<bool> release{false};
  std::atomic<int> walks{0};
  auto walk = [&](uint32_t i, std::atomic<uint64_t>* progress) -> Result<DatasetNamespace> {
    walks++;
    if (i == 0) {
      progress->store(5);  // then nothing
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return Status::ioError("released");
    }
    return makeNamespace(1);
  };
  std::thread hung([&] { obtainAll(fabric, walk, {0}); });
  const auto t0 = std::chrono::steady_clock::now();
  auto out = obtainAll(fabric, walk, {1, 2, 3});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  release = true;
  hung.join();
  EXPECT_EQ(walks.load(), 2);
  EXPECT_GE(waited, 0.4);
  ASSERT_TRUE(out[1].ns.isOk()) << out[1].ns.status().message();
  EXPECT_TRUE(out[1].origin.walked);
  EXPECT_EQ(out[1].origin.countedOut, std::vector<uint32_t>{0});
  for (uint32_t i : {2u, 3u}) {
    ASSERT_TRUE(out[i].ns.isOk()) << i << ": " << out[i].ns.status().message();
    EXPECT_EQ(out[i].origin.walker, 1u);
    EXPECT_EQ(out[i].ns->fingerprint(), out[1].ns->fingerprint());
  }
}

// Member 0's pieces arrive corrupted (a checksum-only fabric, a bad
// relay): its children refuse the image, count it out and take member 1's
// walk instead. A wrong namespace is never used.
TEST(NamespaceExchangeTest, AnImageThatFailsItsChecksIsNeverUsed) {
  Fabric fabric(3, fastOptions());
  fabric.flipPieceOf = 0;
  std::atomic<int> walks{0};
  auto out = obtainAll(fabric,
                       [&](uint32_t i, std::atomic<uint64_t>*) -> Result<DatasetNamespace> {
                         walks++;
                         return makeNamespace(static_cast<int>(i));
                       },
                       {0, 1, 2});
  EXPECT_EQ(walks.load(), 2);
  ASSERT_TRUE(out[1].ns.isOk() && out[2].ns.isOk());
  EXPECT_TRUE(out[1].origin.walked);
  EXPECT_EQ(out[2].ns->fingerprint(), out[1].ns->fingerprint());
  EXPECT_NE(out[1].ns->fingerprint(), out[0].ns->fingerprint());
}

// A member that was up and went down is counted out at once, not after the bound.
TEST(NamespaceExchangeTest, AParentThatWentDownIsSkippedAtOnce) {
  auto o = fastOptions();
  o.stallBound = std::chrono::seconds(60);
  Fabric fabric(3, o);
  std::atomic<bool> started{false};
  auto walk = [&](uint32_t i, std::atomic<uint64_t>* progress) -> Result<DatasetNamespace> {
    if (i == 0) {
      started = true;
      for (int k = 0; k < 400 && !fabric.down[0]; ++k) {
        progress->fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return Status::ioError("killed");
    }
    return makeNamespace(2);
  };
  std::thread zero([&] { obtainAll(fabric, walk, {0}); });
  std::thread killer([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fabric.down[0] = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto out = obtainAll(fabric, walk, {1, 2});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  killer.join();
  zero.join();
  EXPECT_LT(waited, 10.0);  // not the 60 s bound
  ASSERT_TRUE(out[1].ns.isOk() && out[2].ns.isOk());
  EXPECT_TRUE(out[1].origin.walked);
  EXPECT_EQ(out[2].origin.parent, 1u);
}

// The members below never come up (a member started alone): all are counted
// out together after one bound, and it walks, instead of one bound each.
TEST(NamespaceExchangeTest, AMemberAloneWalksAfterOneBound) {
  Fabric fabric(6, fastOptions());
  for (uint32_t i = 0; i < 5; ++i) fabric.down[i] = true;
  const auto t0 = std::chrono::steady_clock::now();
  auto out = obtainAll(
      fabric,
      [&](uint32_t, std::atomic<uint64_t>*) { return Result<DatasetNamespace>(makeNamespace(5)); },
      {5});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(out[5].ns.isOk());
  EXPECT_TRUE(out[5].origin.walked);
  EXPECT_EQ(out[5].origin.countedOut, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_GE(waited, 0.4);
  EXPECT_LT(waited, 1.5);  // one bound (0.4 s), not five
}

}  // namespace
}  // namespace epochfs::fusefs
