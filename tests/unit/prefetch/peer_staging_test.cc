// Peer prefetch: PeerStaging on its own (bounds, FIFO drop of unread chunks,
// versions), and the Prefetcher staging other nodes' files through a fake
// PeerSource into it, never into the RAM tier; one read consumes one entry of
// one stream. Assertions are on counts; time appears only as bounded waits.
#include "cache/peer_staging.h"

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
#include "tests/unit/prefetch/fake_source.h"
#include "tests/unit/prefetch/prefetch_test_util.h"

namespace epochfs::prefetch {
namespace {

using namespace std::chrono_literals;
using cache::ChunkCache;
using Tier = ChunkCache::Tier;

using testing::kChunkSize;
using testing::waitFor;

cache::ChunkRef chunkOf(uint64_t fileId, uint32_t index, size_t size, uint64_t inode = 1) {
  cache::FileIdentity id;
  id.fileId = fileId;
  id.size = 1 << 20;
  id.inode = inode;
  return cache::makeChunk(cache::ChunkKey::make(7, fileId, index), id,
                          std::vector<char>(size, 'x'));
}

// Pass: a full staging area refuses a new chunk while what it holds is fresh
// (it is needed sooner than the newcomer), never exceeding its capacity.
TEST(PeerStagingTest, FullOfFreshChunksRefusesTheNewOne) {
  cache::PeerStaging st(10000, std::chrono::hours(1));
  auto a = chunkOf(1, 0, 4000), b = chunkOf(2, 0, 4000), c = chunkOf(3, 0, 4000);
  ASSERT_TRUE(st.insert(a));
  ASSERT_TRUE(st.insert(b));
  EXPECT_FALSE(st.insert(c));
  EXPECT_EQ(st.refused(), 1u);
  EXPECT_TRUE(st.contains(a->key));
  EXPECT_TRUE(st.contains(b->key));
  EXPECT_FALSE(st.contains(c->key));
  EXPECT_EQ(st.bytesUsed(), 8000u);
}

// Pass: the staging area never holds more than its capacity, drops the
// oldest chunk once stale to admit a new one, refuses a chunk larger than
// itself, serves only the version it holds, and counts erases as consumed.
TEST(PeerStagingTest, BoundedFifoVersionedStore) {
  cache::PeerStaging st(10000, std::chrono::milliseconds(0));
  auto a = chunkOf(1, 0, 4000), b = chunkOf(2, 0, 4000), c = chunkOf(3, 0, 4000);
  ASSERT_TRUE(st.insert(a));
  ASSERT_TRUE(st.insert(b));
  EXPECT_EQ(st.bytesUsed(), 8000u);
  ASSERT_TRUE(st.insert(c));  // a, the oldest, goes
  EXPECT_EQ(st.bytesUsed(), 8000u);
  EXPECT_FALSE(st.contains(a->key));
  EXPECT_TRUE(st.contains(b->key));
  EXPECT_EQ(st.usage().evictions, 1u);
  EXPECT_FALSE(st.insert(chunkOf(4, 0, 10001)));
  EXPECT_EQ(st.lookup(b->key, b->identity), b);
  cache::FileIdentity other = b->identity;
  other.inode = 99;
  EXPECT_EQ(st.lookup(b->key, other), nullptr);  // another version is never served
  st.erase(b->key);
  EXPECT_EQ(st.consumed(), 1u);
  EXPECT_EQ(st.bytesUsed(), 4000u);
  EXPECT_EQ(st.admitted(), 3u);
}

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
        ram(16ull << 20),
        staging(1 << 20),
        cache(testing::cacheOptions(42), source, ram, nullptr) {
    spdlog::set_level(spdlog::level::warn);
    cache.setPeers(&peers);
    cache.setStaging(&staging);
    PrefetchOptions po;
    po.workers = 8;
    po.windowFiles = 64;
    prefetcher = std::make_unique<Prefetcher>(po, cache);
    ram.setAdvisor(prefetcher.get());
  }
  ~StagingRig() {
    ram.setAdvisor(nullptr);
    prefetcher.reset();
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
  cache::PeerStaging staging;
  ChunkCache cache;
  std::unique_ptr<Prefetcher> prefetcher;
};

// Pass: with a plan, other nodes' files are fetched from their owner into the
// staging area ahead of the reader (never into the RAM tier), every read of
// them is served from staging without another peer fetch, and each staged
// chunk leaves the staging area once its entry is consumed.
TEST(PeerPrefetchTest, OtherNodesFilesAreStagedNotCachedAndReadFromStaging) {
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
      const bool remote = e.relPath.rfind("peer", 0) == 0;
      if (!(remote ? rig.staging.contains(rig.key(e)) : rig.ram.contains(rig.key(e)))) return false;
    }
    return true;
  })) << "the whole plan is prefetched";
  for (const auto& e : plan) {
    if (e.relPath.rfind("peer", 0) == 0) {
      EXPECT_FALSE(rig.ram.contains(rig.key(e))) << e.relPath << " displaced the RAM tier";
    }
  }
  EXPECT_EQ(rig.peers.fetches.load(), peerFiles);
  for (const auto& e : plan) {
    const bool remote = e.relPath.rfind("peer", 0) == 0;
    EXPECT_EQ(rig.read(e), remote ? Tier::kStaging : Tier::kRam) << e.relPath;
  }
  EXPECT_EQ(rig.peers.fetches.load(), peerFiles) << "a read went to the network again";
  EXPECT_EQ(rig.staging.bytesUsed(), 0u) << "consumed chunks still staged";
  EXPECT_EQ(rig.staging.consumed(), static_cast<uint64_t>(peerFiles));
  EXPECT_EQ(rig.prefetcher->stats()[0].stalls, 0u);
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
