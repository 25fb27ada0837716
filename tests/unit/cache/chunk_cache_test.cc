// ChunkCache on its own: the read path's tier order (RAM, disk, peer,
// source), coalescing of concurrent misses, staging and peer requests,
// invalidation, a failing peer or source, and the race between a finishing
// fetch and a second reader's miss.
#include "cache/chunk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/lease.h"
#include "cache/peer_source.h"
#include "cache/ram_tier.h"
#include "tests/unit/cache/call_gate.h"
#include "tests/unit/cache/fake_source.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::cache {
namespace {

using namespace std::chrono_literals;
using testing::LatencySource;
using Tier = ChunkCache::Tier;

constexpr uint32_t kChunk = 4096;

ChunkCache::Options options() {
  ChunkCache::Options o;
  o.datasetId = 42;
  o.chunkSize = kChunk;
  return o;
}

bool waitFor(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Every file named "peer*" is another node's; fetch() reads it from `remote`
// (the owner's source) or fails while `failing`.
class FakePeers : public PeerSource {
 public:
  explicit FakePeers(LatencySource& remote) : remote_(remote) {}
  bool ownedElsewhere(uint64_t fileId) const override { return owned_.count(fileId) != 0; }
  Result<ChunkRef> fetch(const std::string& relPath, const FileIdentity& id,
                         const ChunkKey& key) override {
    fetches.fetch_add(1);
    if (failing.load()) return Status::unavailable("peer down");
    const uint64_t off = uint64_t{key.chunkIndex} * kChunk;
    std::vector<char> data(std::min<uint64_t>(kChunk, id.size - off));
    auto n = remote_.read(relPath, id, off, data.data(), data.size());
    if (!n.isOk()) return n.status();
    return makeChunk(key, id, std::move(data));
  }
  void own(uint64_t fileId) { owned_.insert(fileId); }
  std::atomic<int> fetches{0};
  std::atomic<bool> failing{false};

 private:
  LatencySource& remote_;
  std::set<uint64_t> owned_;
};

TEST(ChunkCache, AMissReadsTheSourceOnceThenTheRamTierServes) {
  LatencySource source;
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  const FileIdentity id = source.addFile("a", 3 * kChunk + 10);
  Tier from;
  for (uint32_t i = 0; i < 4; ++i) {
    auto r = cache.get("a", id, i, &from);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(from, Tier::kSource);
    EXPECT_EQ((*r)->size(), i < 3 ? kChunk : 10u);
  }
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(cache.get("a", id, i, &from).isOk());
    EXPECT_EQ(from, Tier::kRam);
  }
  EXPECT_EQ(source.readsOf("a"), 4u);
  EXPECT_EQ(cache.stats().sourceReads.chunks.load(), 4u);
}

TEST(ChunkCache, ConcurrentMissesOfOneChunkAreOneSourceRead) {
  LatencySource source(20ms);
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  const FileIdentity id = source.addFile("a", kChunk);
  std::vector<std::thread> readers;
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] { EXPECT_TRUE(cache.get("a", id, 0).isOk()); });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(source.readsOf("a"), 1u);
  EXPECT_GE(cache.stats().coalesced.load(), 1u);
}

TEST(ChunkCache, AnEvictedChunkComesBackFromTheDiskTierNotTheSource) {
  ::epochfs::testing::ScopedTempDir tmp("epochfs-chunk-cache", "/var/tmp");
  DiskTierOptions o;
  o.dir = tmp.path() + "/cache";
  o.capacityBytes = 64ull << 20;
  auto disk = DiskTier::open(o);
  ASSERT_TRUE(disk.isOk()) << disk.status().toString();
  LatencySource source;
  RamTier ram(2 * kChunk);  // two chunks: the third evicts the first
  ChunkCache cache(options(), source, ram, disk->get());
  const FileIdentity id = source.addFile("a", 3 * kChunk);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(cache.get("a", id, i).isOk());
  ASSERT_TRUE(waitFor([&] { return (*disk)->contains(cache.keyFor(id.fileId, 0)); }));
  Tier from;
  ASSERT_TRUE(cache.get("a", id, 0, &from).isOk());
  EXPECT_EQ(from, Tier::kDisk);
  EXPECT_EQ(source.readsOf("a"), 3u);
}

TEST(ChunkCache, AnotherNodesFileComesFromItsOwnerAndFromTheSourceWhenTheOwnerFails) {
  LatencySource source, remote;
  FakePeers peers(remote);
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  const Lease lease = cache.lendPeers(peers);
  const FileIdentity id = source.addFile("peer1", kChunk);
  remote.addFile("peer1", std::string(kChunk, '\0'));
  peers.own(id.fileId);
  Tier from;
  ASSERT_TRUE(cache.get("peer1", id, 0, &from).isOk());
  EXPECT_EQ(from, Tier::kPeer);
  EXPECT_EQ(source.readsOf("peer1"), 0u);

  const FileIdentity id2 = source.addFile("peer2", kChunk);
  peers.own(id2.fileId);
  peers.failing.store(true);
  auto r = cache.get("peer2", id2, 0, &from);
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(from, Tier::kSource) << "a peer fault falls back to the source";
  EXPECT_EQ(source.readsOf("peer2"), 1u);
  // A peer's own request is never sent on to another peer.
  const FileIdentity id3 = source.addFile("peer3", kChunk);
  peers.own(id3.fileId);
  const int before = peers.fetches.load();
  ASSERT_TRUE(cache.getForPeer("peer3", id3, 0).isOk());
  EXPECT_EQ(peers.fetches.load(), before);
}

// As FakePeers; a fetch passes `gate` first.
class GatedPeers : public FakePeers {
 public:
  using FakePeers::FakePeers;
  Result<ChunkRef> fetch(const std::string& relPath, const FileIdentity& id,
                         const ChunkKey& key) override {
    gate.pass();
    return FakePeers::fetch(relPath, id, key);
  }
  testing::CallGate gate;
};

// Pass: ending the peers lease waits for a peer fetch in progress (whose
// chunk still comes from the peer); after it the cache is not clustered and a
// miss of another node's file reads the source.
TEST(ChunkCache, EndingThePeersLeaseWaitsForAFetchThenMissesReadTheSource) {
  LatencySource source, remote;
  GatedPeers peers(remote);
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  Lease lease = cache.lendPeers(peers);
  EXPECT_TRUE(cache.clustered());
  const FileIdentity id = source.addFile("peer1", kChunk);
  remote.addFile("peer1", std::string(kChunk, '\0'));
  peers.own(id.fileId);
  const FileIdentity id2 = source.addFile("peer2", kChunk);
  peers.own(id2.fileId);
  peers.gate.arm();
  Tier from1 = Tier::kRam;
  std::thread reader([&] { EXPECT_TRUE(cache.get("peer1", id, 0, &from1).isOk()); });
  EXPECT_TRUE(testing::waitsForHeldCall(peers.gate, [&] { lease.end(); }));
  reader.join();
  EXPECT_EQ(from1, Tier::kPeer);
  EXPECT_FALSE(cache.clustered());
  EXPECT_FALSE(cache.ownedElsewhere(id2.fileId));
  Tier from2 = Tier::kRam;
  ASSERT_TRUE(cache.get("peer2", id2, 0, &from2).isOk());
  EXPECT_EQ(from2, Tier::kSource);
  EXPECT_EQ(peers.fetches.load(), 1);
}

TEST(ChunkCache, InvalidateDropsEveryChunkOfTheFile) {
  LatencySource source;
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  const FileIdentity id = source.addFile("a", 2 * kChunk);
  ASSERT_TRUE(cache.get("a", id, 0).isOk());
  ASSERT_TRUE(cache.get("a", id, 1).isOk());
  cache.invalidate(id);
  EXPECT_FALSE(ram.contains(cache.keyFor(id.fileId, 0)));
  EXPECT_FALSE(ram.contains(cache.keyFor(id.fileId, 1)));
  Tier from;
  ASSERT_TRUE(cache.get("a", id, 0, &from).isOk());
  EXPECT_EQ(from, Tier::kSource);
}

TEST(ChunkCache, ASourceErrorIsReturnedAndCountedNotCached) {
  LatencySource source;
  RamTier ram(1 << 20);
  ChunkCache cache(options(), source, ram, nullptr);
  const FileIdentity id = source.addFile("a", kChunk);
  source.injectError("a", Status::ioError("disk on fire"));
  EXPECT_FALSE(cache.get("a", id, 0).isOk());
  EXPECT_EQ(cache.stats().sourceErrors.load(), 1u);
  source.clearError("a");
  EXPECT_TRUE(cache.get("a", id, 0).isOk());
}

// A RAM tier whose next lookup miss, once armed, waits until released: it
// holds a reader between "not in RAM" and joining the in-flight fetch.
class PausingRamTier : public RamTier {
 public:
  explicit PausingRamTier(uint64_t capacity) : RamTier(capacity) {}
  void armNextMiss() { gate_.arm(); }
  bool waitPaused() { return gate_.waitHeld(); }
  void release() { gate_.release(); }

  ChunkRef find(const ChunkKey& key, const FileIdentity& id, bool* staged) override {
    ChunkRef c = RamTier::find(key, id, staged);
    if (c == nullptr) gate_.pass();
    return c;
  }

 private:
  testing::CallGate gate_;
};

// The race behind double reads in the tests above (a prefetch worker and a
// demand read of one chunk): reader B misses in RAM while A's fetch of the
// chunk is in flight, and A inserts the chunk and retires its in-flight entry
// before B looks for that entry, so B fetches the chunk again. ChunkCache::get
// must look in the RAM tier (and disk tier) again once it is the leader.
TEST(ChunkCache, AMissThatLosesTheRaceDoesNotReadAgain) {
  LatencySource source(50ms);
  PausingRamTier store(1 << 20);
  ChunkCache cache(options(), source, store, nullptr);
  const FileIdentity id = source.addFile("x", 1000);

  std::thread a([&] { EXPECT_TRUE(cache.get("x", id, 0).isOk()); });
  ASSERT_TRUE(waitFor([&] { return source.concurrentReads() == 1; }));  // A leads the fetch
  store.armNextMiss();
  std::thread b([&] { EXPECT_TRUE(cache.get("x", id, 0).isOk()); });
  ASSERT_TRUE(store.waitPaused());  // B missed in RAM
  a.join();                         // A's fetch is complete and retired
  store.release();
  b.join();
  EXPECT_EQ(source.totalReads(), 1u)
      << "ChunkCache::get re-read a chunk that a finished fetch had just put in RAM";
}

}  // namespace
}  // namespace epochfs::cache
