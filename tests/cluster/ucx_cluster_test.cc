// In-process clusters over real UCX (UCX_TLS=tcp on loopback): handshake,
// placement agreement, fetches with large (rendezvous) payloads, a wrong
// secret refused, a slow owner hitting the deadline, a node leaving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cache/chunk.h"
#include "tests/loopback_port.h"
#include "transport/cluster.h"

namespace epochfs::transport {
namespace {

using namespace std::chrono_literals;

using test_support::freeLoopbackPort;

std::vector<char> bytesFor(uint64_t fileId, uint32_t index, size_t n) {
  std::vector<char> v(n);
  uint64_t x = fileId * 31 + index;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<char>(x >> 56);
  }
  return v;
}

cache::FileIdentity identity(uint64_t fileId, uint64_t size) {
  return cache::FileIdentity{fileId, size, 1000, 2000, fileId % 977};
}

struct Node {
  std::unique_ptr<Cluster> cluster;
  std::atomic<int> served{0};
  std::atomic<int> delayMs{0};
};

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("UCX_TLS", "tcp", 0); }

  std::vector<Member> members(int n) {
    std::vector<Member> m;
    for (int i = 0; i < n; ++i) m.push_back(Member{uint32_t(i), "127.0.0.1", freeLoopbackPort()});
    return m;
  }

  std::unique_ptr<Node> start(const std::vector<Member>& m, uint32_t self,
                              const std::string& secret = "the-job-secret-0123", bool mac = true,
                              std::chrono::milliseconds deadline = 2000ms) {
    auto node = std::make_unique<Node>();
    ClusterConfig c;
    c.members = m;
    c.selfId = self;
    c.listenHost = m[self].host;
    c.listenPort = m[self].port;
    c.secret = secret;
    c.macPayloads = mac;
    c.deadline = deadline;
    c.capacityBytes = 1 << 30;
    Node* raw = node.get();
    auto r = Cluster::start(
        c, [raw](const cache::FileIdentity& id, uint32_t index) -> cache::Result<cache::ChunkRef> {
          raw->served.fetch_add(1);
          if (int d = raw->delayMs.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(d));
          const cache::ChunkKey key = cache::ChunkKey::make(1, id.fileId, index);
          return cache::makeChunk(key, id, bytesFor(id.fileId, index, id.size));
        });
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (r.isOk()) node->cluster = std::move(r).value();
    return node;
  }

  // Polls `pred` (the cluster's state lives on its progress thread) until it
  // holds or `t` passed.
  template <typename Pred>
  static bool waitUntil(Pred pred, std::chrono::milliseconds t = 10s) {
    const auto until = std::chrono::steady_clock::now() + t;
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  static bool waitLive(Cluster& c, size_t want, std::chrono::milliseconds t = 10s) {
    return waitUntil(
        [&] {
          size_t live = 0;
          for (const auto& p : c.peers()) live += p.live;
          return live == want;
        },
        t);
  }
};

TEST_F(ClusterTest, ThreeNodesAgreeAndFetch) {
  auto m = members(3);
  std::vector<std::unique_ptr<Node>> nodes;
  for (uint32_t i = 0; i < 3; ++i) nodes.push_back(start(m, i));
  for (auto& n : nodes) ASSERT_TRUE(waitLive(*n->cluster, 3));
  int fetched = 0;
  for (uint64_t f = 1; f <= 60; ++f) {
    const uint64_t fileId = f * 0x9e3779b97f4a7c15ull;
    const auto owners = nodes[0]->cluster->owners(fileId);
    ASSERT_EQ(owners.size(), 1u);
    for (auto& n : nodes) EXPECT_EQ(n->cluster->owners(fileId), owners);
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(nodes[i]->cluster->ownedElsewhere(fileId), owners[0] != i);
    }
    const uint32_t asker = (owners[0] + 1) % 3;
    // Sizes on both sides of UCX's rendezvous threshold.
    const uint64_t size = f % 2 ? 3000 : (1 << 20);
    auto id = identity(fileId, size);
    auto r = nodes[asker]->cluster->fetch("f", id, cache::ChunkKey::make(1, fileId, 0));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ((*r)->data, bytesFor(fileId, 0, size));
    EXPECT_TRUE((*r)->verify());
    ++fetched;
  }
  int served = 0;
  for (auto& n : nodes) served += n->served.load();
  EXPECT_EQ(served, fetched);
  uint64_t bytes = 0;
  for (auto& n : nodes) {
    for (const auto& p : n->cluster->peers()) bytes += p.bytesFetched;
  }
  EXPECT_GT(bytes, 25u << 20);
}

TEST_F(ClusterTest, ManyInFlightFromManyThreads) {
  auto m = members(2);
  auto a = start(m, 0), b = start(m, 1);
  ASSERT_TRUE(waitLive(*a->cluster, 2));
  ASSERT_TRUE(waitLive(*b->cluster, 2));
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (uint64_t f = 1; f < 400; ++f) {
        const uint64_t fileId = f * 1000003 + static_cast<uint64_t>(t);
        if (!a->cluster->ownedElsewhere(fileId)) continue;
        auto id = identity(fileId, 256 << 10);
        auto r = a->cluster->fetch("f", id, cache::ChunkKey::make(1, fileId, 2));
        if (r.isOk() && (*r)->data == bytesFor(fileId, 2, 256 << 10)) ok.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), b->served.load());
  EXPECT_GT(ok.load(), 1000);
}

// Pass: one-chunk files of 150-400 KiB in random order (each reply longer or
// shorter than the one before: the receive buffer is sized by the largest reply
// so far, and a longer reply takes a pooled buffer of its size) all arrive
// whole, with their own bytes.
TEST_F(ClusterTest, RepliesOfMixedSizesArriveWhole) {
  auto m = members(2);
  auto a = start(m, 0), b = start(m, 1);
  ASSERT_TRUE(waitLive(*a->cluster, 2));
  ASSERT_TRUE(waitLive(*b->cluster, 2));
  uint64_t x = 2026;
  int fetched = 0;
  for (uint64_t f = 1; fetched < 120 && f < 10000; ++f) {
    const uint64_t fileId = f * 0x9e3779b97f4a7c15ull;
    if (!a->cluster->ownedElsewhere(fileId)) continue;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t size = (150 << 10) + (x >> 33) % (250 << 10);
    auto r = a->cluster->fetch("f", identity(fileId, size), cache::ChunkKey::make(1, fileId, 0));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ((*r)->data.size(), size);
    EXPECT_EQ((*r)->data, bytesFor(fileId, 0, size));
    EXPECT_TRUE((*r)->verify());
    ++fetched;
  }
  EXPECT_EQ(fetched, 120);
}

TEST_F(ClusterTest, WrongSecretIsRefused) {
  auto m = members(2);
  auto a = start(m, 0, "the-job-secret-0123");
  auto b = start(m, 1, "another-jobs-secret");
  // Each side's handshake with the other failed its proof at least once.
  ASSERT_TRUE(waitUntil([&] {
    return a->cluster->peers()[1].authFailures > 0 && b->cluster->peers()[0].authFailures > 0;
  }));
  for (auto* n : {a.get(), b.get()}) {
    auto p = n->cluster->peers();
    const auto& other = p[n == a.get() ? 1 : 0];
    EXPECT_FALSE(other.live);
    EXPECT_GT(other.authFailures, 0u);
    EXPECT_FALSE(n->cluster->ownedElsewhere(12345));
  }
  auto r = a->cluster->fetch("f", identity(5, 10), cache::ChunkKey::make(1, 5, 0));
  EXPECT_FALSE(r.isOk());
  EXPECT_EQ(b->served.load(), 0);
}

TEST_F(ClusterTest, ChecksumModeMustMatch) {
  auto m = members(2);
  auto a = start(m, 0, "the-job-secret-0123", true);
  auto b = start(m, 1, "the-job-secret-0123", false);
  std::this_thread::sleep_for(1000ms);
  EXPECT_FALSE(a->cluster->peers()[1].live);
  auto c = members(2);
  auto x = start(c, 0, "the-job-secret-0123", false), y = start(c, 1, "the-job-secret-0123", false);
  ASSERT_TRUE(waitLive(*x->cluster, 2));
  for (uint64_t f = 1;; ++f) {
    if (!x->cluster->ownedElsewhere(f)) continue;
    auto r = x->cluster->fetch("f", identity(f, 5000), cache::ChunkKey::make(1, f, 0));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ((*r)->data, bytesFor(f, 0, 5000));
    break;
  }
}

// Disabled: timing-dependent (a suspect peer can answer and be lost again
// within the test's window on a loaded 2-core machine); the same path runs
// end to end in ClusterMountTest.KilledAndFrozenPeersLoseNoRead.
TEST_F(ClusterTest, DISABLED_SlowOwnerMissesDeadlineThenRejoins) {
  auto m = members(2);
  auto a = start(m, 0, "the-job-secret-0123", true, 300ms),
       b = start(m, 1, "the-job-secret-0123", true, 300ms);
  ASSERT_TRUE(waitLive(*a->cluster, 2));
  uint64_t f = 1;
  while (!a->cluster->ownedElsewhere(f)) ++f;
  b->delayMs = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = a->cluster->fetch("f", identity(f, 100), cache::ChunkKey::make(1, f, 0));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(r.isOk());
  EXPECT_LT(took, 700ms);
  // Suspect: out of placement until it answers a ping.
  EXPECT_FALSE(a->cluster->ownedElsewhere(f));
  b->delayMs = 0;
  ASSERT_TRUE(waitLive(*a->cluster, 2, 5s));
  auto again = a->cluster->fetch("f", identity(f, 100), cache::ChunkKey::make(1, f, 0));
  EXPECT_TRUE(again.isOk()) << again.status().toString();
}

TEST_F(ClusterTest, NodeLeavesAndRejoins) {
  auto m = members(3);
  auto a = start(m, 0), b = start(m, 1), c = start(m, 2);
  ASSERT_TRUE(waitLive(*a->cluster, 3));
  c.reset();  // leaves
  ASSERT_TRUE(waitLive(*a->cluster, 2, 5s));
  for (uint64_t f = 1; f < 200; ++f) {
    for (uint32_t o : a->cluster->owners(f)) EXPECT_NE(o, 2u);
  }
  c = start(m, 2);
  ASSERT_TRUE(waitLive(*a->cluster, 3, 10s));
  ASSERT_TRUE(waitLive(*c->cluster, 3, 10s));
}

}  // namespace
}  // namespace epochfs::transport
