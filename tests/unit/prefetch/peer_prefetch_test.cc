// Peer prefetch: the Prefetcher stages other nodes' files through a fake
// PeerSource as guests of the RAM tier (cache/ram_tier.h; the tier's own rules
// are in tests/unit/cache/ram_tier_classes_test.cc), never displacing owned
// chunks; a consumed guest whose next use is beyond the window leaves; one
// read consumes one entry of one stream. Assertions are on counts; time
// appears only as bounded waits.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "cache/peer_source.h"
#include "cache/ram_tier.h"
#include "prefetch/access_plan.h"
#include "prefetch/prefetcher.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;
using cache::ChunkCache;
using Tier = ChunkCache::Tier;

using testing::kChunkSize;
using testing::waitFor;

// Every file named "peer*" is owned by another node; fetch() reads it from
// the "owner's" source and counts the fetches.
class FakePeers : public cache::PeerSource {
 public:
  explicit FakePeers(testing::LatencySource& remote) : remote_(remote) {}
  bool ownedElsewhere(uint64_t fileId) const override { return peerFiles_.count(fileId) != 0; }
  cache::Result<cache::ChunkRef> fetch(const std::string& relPath, const cache::FileIdentity& id,
                                       const cache::ChunkKey& key) override {
    fetches.fetch_add(1);
    const uint64_t off = uint64_t{key.chunkIndex} * kChunkSize;
    std::vector<char> data(std::min<uint64_t>(kChunkSize, id.size - off));
    auto n = remote_.read(relPath, id, off, data.data(), data.size());
    if (!n.isOk()) return n.status();
    return cache::makeChunk(key, id, std::move(data));
  }
  void own(uint64_t fileId) { peerFiles_.insert(fileId); }
  std::atomic<int> fetches{0};

 private:
  testing::LatencySource& remote_;
  std::set<uint64_t> peerFiles_;  // filled before reads start
};

struct StagingRig {
  StagingRig()
      : source(200us),
        peers(source),
        ram(16ull << 20, 1 << 20),
        cache(testing::cacheOptions(42), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    peersLease = cache.lendPeers(peers);
    ownershipLease = ram.lendOwnership(peers);
    PrefetchOptions po;
    po.workers = 8;
    po.windowFiles = 64;
    prefetcher = std::make_unique<Prefetcher>(po, cache);
    advisorLease = ram.lendAdvisor(*prefetcher);
  }
  PlanEntry add(const std::string& name, size_t size) {
    PlanEntry e;
    e.relPath = name;
    e.identity = source.addFile(name, size);
    e.length = size;
    if (name.rfind("peer", 0) == 0) peers.own(e.identity.fileId);
    return e;
  }
  cache::ChunkKey key(const PlanEntry& e) const { return cache.keyFor(e.identity.fileId, 0); }
  Tier read(const PlanEntry& e) {
    Tier worst = Tier::kRam;
    for (uint32_t i = 0; i * uint64_t{kChunkSize} < e.identity.size; ++i) {
      Tier t;
      EXPECT_TRUE(cache.get(e.relPath, e.identity, i, &t).isOk());
      worst = std::max(worst, t);
    }
    prefetcher->onRead(e.identity.fileId, 0, e.identity.size, worst);
    return worst;
  }

  testing::LatencySource source;
  FakePeers peers;
  cache::RamTier ram;
  ChunkCache cache;
  std::unique_ptr<Prefetcher> prefetcher;
  // Declared last: they end before what they lent goes.
  cache::Lease peersLease, ownershipLease, advisorLease;
};

// Pass: with a plan, other nodes' files are fetched from their owner as staged
// guests ahead of the reader (owned chunks stay owned), every read of them is
// served from the staged guest without another peer fetch, and each staged
// guest leaves the tier once its entry is consumed (no later use in the plan).
TEST(PeerPrefetchTest, OtherNodesFilesAreStagedAsGuestsAndLeaveOnceRead) {
  StagingRig rig;
  std::vector<PlanEntry> plan;
  int peerFiles = 0;
  for (int i = 0; i < 40; ++i) {
    const bool remote = i % 4 != 0;
    plan.push_back(rig.add((remote ? "peer" : "own") + std::to_string(i), 3000));
    peerFiles += remote;
  }
  rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(0, 0, 0, plan));
  ASSERT_TRUE(waitFor([&] {
    for (const auto& e : plan) {
      if (!rig.ram.contains(rig.key(e))) return false;
    }
    return true;
  })) << "the whole plan is prefetched";
  EXPECT_EQ(rig.ram.staged().chunks, static_cast<uint64_t>(peerFiles));
  EXPECT_EQ(rig.ram.guests().chunks, static_cast<uint64_t>(peerFiles));
  EXPECT_EQ(rig.ram.owned().chunks, static_cast<uint64_t>(plan.size() - peerFiles));
  EXPECT_EQ(rig.peers.fetches.load(), peerFiles);
  for (const auto& e : plan) {
    const bool remote = e.relPath.rfind("peer", 0) == 0;
    EXPECT_EQ(rig.read(e), remote ? Tier::kStaging : Tier::kRam) << e.relPath;
  }
  EXPECT_EQ(rig.peers.fetches.load(), peerFiles) << "a read went to the network again";
  EXPECT_EQ(rig.ram.staged().bytes, 0u) << "consumed chunks still staged";
  EXPECT_EQ(rig.ram.guests().chunks, 0u) << "consumed guests needed nowhere later still held";
  EXPECT_EQ(rig.ram.owned().chunks, static_cast<uint64_t>(plan.size() - peerFiles));
  EXPECT_EQ(rig.prefetcher->stats()[0].stalls, 0u);
}

// Pass: with an order registered, a consumed guest whose next use is within
// the prefetch window stays in the RAM tier (no second fetch for it), and one
// whose next use lies beyond the window leaves at once.
TEST(PeerPrefetchTest, ConsumedGuestStaysOnlyWhenNeededWithinTheWindow) {
  StagingRig rig;  // window: 64 entries
  std::vector<PlanEntry> plan;
  const PlanEntry soon = rig.add("peer-soon", 3000), late = rig.add("peer-late", 3000);
  plan.push_back(soon);
  plan.push_back(late);
  for (int i = 0; i < 100; ++i) {
    plan.push_back(rig.add("own" + std::to_string(i), 1000));
    if (i == 10) plan.push_back(soon);  // needed again 11 entries on
  }
  plan.push_back(late);  // needed again 100 entries on: beyond the window
  rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(0, 0, 0, plan));
  ASSERT_TRUE(
      waitFor([&] { return rig.ram.contains(rig.key(soon)) && rig.ram.contains(rig.key(late)); }));
  rig.read(soon);
  rig.read(late);
  EXPECT_TRUE(rig.ram.contains(rig.key(soon))) << "needed again within the window";
  EXPECT_FALSE(rig.ram.contains(rig.key(late))) << "needed only beyond the window";
  EXPECT_EQ(rig.ram.owned().evictions, 0u);
}

// Pass: a file named by two streams (another rank, or the next epoch) is
// consumed in one stream only: the one where it is nearest the position.
TEST(PeerPrefetchTest, OneReadConsumesOneEntryOfOneStream) {
  StagingRig rig;
  std::vector<PlanEntry> a, b;
  for (int i = 0; i < 20; ++i) a.push_back(rig.add("own-a" + std::to_string(i), 1000));
  for (int i = 0; i < 20; ++i) b.push_back(rig.add("own-b" + std::to_string(i), 1000));
  b[15] = a[0];  // rank 1 reads a[0] much later
  rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(0, 0, 0, a));
  rig.prefetcher->setPlan(std::make_shared<const AccessPlan>(0, 1, 0, b));
  rig.read(a[0]);
  uint64_t c0 = 0, c1 = 0;
  for (const auto& s : rig.prefetcher->stats()) (s.rank == 0 ? c0 : c1) = s.consumed;
  EXPECT_EQ(c0, 1u);
  EXPECT_EQ(c1, 0u);
}

}  // namespace
}  // namespace epochfs::prefetch
