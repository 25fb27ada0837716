// The RAM tier's borrowed objects (lendAdvisor, lendOwnership): ending a
// lease waits for an insert that is consulting the object, and from then on
// the tier evicts by recency (no advisor) and counts every chunk as owned (no
// view). No mount, no prefetcher: fakes that block on a gate.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cache/lease.h"
#include "cache/ram_tier.h"
#include "tests/unit/cache/call_gate.h"

namespace epochfs::cache {
namespace {

using namespace std::chrono_literals;
using testing::CallGate;
using testing::waitsForHeldCall;

constexpr uint64_t kKiB = 1024;
constexpr size_t kChunk = 10 * kKiB;

ChunkRef chunk(uint64_t fileId) {
  FileIdentity id;
  id.fileId = fileId;
  id.size = kChunk;
  id.inode = fileId;
  return makeChunk(ChunkKey::make(7, fileId, 0), id, std::vector<char>(kChunk, 'x'));
}

// File 1 is needed next, file 3 after it, every other file never.
class FixedAdvisor : public EvictionAdvisor {
 public:
  bool active() const override { return true; }
  uint64_t nextUseNs(const ChunkKey& key) const override {
    gate.pass();
    return key.fileId == 1 ? 1 : key.fileId == 3 ? 2 : kNever;
  }
  CallGate gate;
};

// Files from 100 up are other nodes'.
class GuestsFrom100 : public OwnershipView {
 public:
  bool ownedHere(uint64_t fileId) const override {
    gate.pass();
    return fileId < 100;
  }
  CallGate gate;
};

// Pass: with the advisor, inserting file 3 into a full tier of {1, 2} evicts
// 2 (never needed) although 1 is colder; ending the lease waits for the
// insert consulting the advisor; after it, inserting file 4 evicts the
// coldest (1), which the advisor would have kept.
TEST(RamTierLeaseTest, EndingTheAdvisorLeaseWaitsAndLeavesPlainLru) {
  RamTier tier(2 * kChunk);
  ASSERT_EQ(tier.shardCount(), 1u);
  FixedAdvisor advisor;
  Lease lease = tier.lendAdvisor(advisor);
  const ChunkRef c1 = chunk(1), c2 = chunk(2), c3 = chunk(3), c4 = chunk(4);
  ASSERT_TRUE(tier.insert(c1));
  ASSERT_TRUE(tier.insert(c2));
  advisor.gate.arm();
  std::thread inserter([&] { EXPECT_TRUE(tier.insert(c3)); });
  EXPECT_TRUE(waitsForHeldCall(advisor.gate, [&] { lease.end(); }));
  inserter.join();
  EXPECT_TRUE(tier.contains(c1->key));
  EXPECT_FALSE(tier.contains(c2->key));
  EXPECT_TRUE(tier.contains(c3->key));

  ASSERT_TRUE(tier.insert(c4));
  EXPECT_FALSE(tier.contains(c1->key)) << "LRU: the coldest goes";
  EXPECT_TRUE(tier.contains(c3->key));
  EXPECT_TRUE(tier.contains(c4->key));
}

// Pass: with the view, file 101 is a guest; ending the lease waits for the
// insert asking the view; after it, file 102 is admitted as owned and
// reclassify() makes 101 owned too.
TEST(RamTierLeaseTest, EndingTheOwnershipLeaseWaitsAndLeavesEveryChunkOwned) {
  RamTier tier(10 * kChunk);
  GuestsFrom100 view;
  Lease lease = tier.lendOwnership(view);
  ASSERT_TRUE(tier.insert(chunk(1)));
  ASSERT_TRUE(tier.insert(chunk(101)));
  EXPECT_EQ(tier.guests().chunks, 1u);
  view.gate.arm();
  std::thread inserter([&] { EXPECT_TRUE(tier.insert(chunk(102))); });
  EXPECT_TRUE(waitsForHeldCall(view.gate, [&] { lease.end(); }));
  inserter.join();
  EXPECT_EQ(tier.guests().chunks, 2u);

  ASSERT_TRUE(tier.insert(chunk(103)));
  EXPECT_EQ(tier.guests().chunks, 2u);
  EXPECT_EQ(tier.owned().chunks, 2u);
  EXPECT_EQ(tier.reclassify(), 2u);
  EXPECT_EQ(tier.guests().chunks, 0u);
  EXPECT_EQ(tier.owned().chunks, 4u);
}

// Pass: a reclassify() in progress holds the view too; ending the lease
// waits for it.
TEST(RamTierLeaseTest, EndingTheOwnershipLeaseWaitsForAReclassify) {
  RamTier tier(10 * kChunk);
  GuestsFrom100 view;
  Lease lease = tier.lendOwnership(view);
  ASSERT_TRUE(tier.insert(chunk(1)));
  view.gate.arm();
  std::thread reclassifier([&] { EXPECT_EQ(tier.reclassify(), 0u); });
  EXPECT_TRUE(waitsForHeldCall(view.gate, [&] { lease.end(); }));
  reclassifier.join();
}

// Pass: the tier may go before the lease; ending it then is harmless (ASan).
TEST(RamTierLeaseTest, ALeaseMayOutliveTheTier) {
  FixedAdvisor advisor;
  Lease lease;
  {
    RamTier tier(2 * kChunk);
    lease = tier.lendAdvisor(advisor);
    ASSERT_TRUE(tier.insert(chunk(1)));
  }
  lease.end();
}

}  // namespace
}  // namespace epochfs::cache
