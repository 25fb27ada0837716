// RamTier's two classes (cache/ram_tier.h): owned chunks (this node's share)
// and guests (other nodes' chunks, staged ones from peer prefetch), with a
// fake OwnershipView. Checks the invariant that no owned chunk is evicted
// while a guest is resident, the guests' budget (free room plus the extra),
// that a hit never lifts a guest above owned chunks, class changes in place,
// and staged guests' protection, staleness and room.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "cache/chunk.h"
#include "cache/ram_tier.h"

namespace epochfs::cache {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kKiB = 1024;

// Files whose id is in `guests` are owned by another node.
class FakeOwnership : public OwnershipView {
 public:
  bool ownedHere(uint64_t fileId) const override { return guests.count(fileId) == 0; }
  std::set<uint64_t> guests;
};

ChunkRef chunk(uint64_t fileId, size_t size) {
  FileIdentity id;
  id.fileId = fileId;
  id.size = size;
  id.inode = fileId;
  return makeChunk(ChunkKey::make(7, fileId, 0), id, std::vector<char>(size, 'x'));
}

bool has(const RamTier& t, const ChunkRef& c) { return t.contains(c->key); }

struct Rig {
  explicit Rig(uint64_t capacity, uint64_t extra = 0, std::chrono::milliseconds stale = 1h)
      : tier(capacity, extra, stale), lease(tier.lendOwnership(view)) {}
  ChunkRef guest(uint64_t fileId, size_t size) {
    view.guests.insert(fileId);
    return chunk(fileId, size);
  }
  FakeOwnership view;
  RamTier tier;
  Lease lease;  // declared last: ends before the view goes
};

// Pass: owned chunks never leave for guests; a guest that does not fit beside
// them is refused; an owned insert evicts guests (coldest first) before any
// owned chunk.
TEST(RamTierClassesTest, GuestsLiveOnlyInTheRoomOwnedChunksLeave) {
  Rig rig(100 * kKiB);
  std::vector<ChunkRef> owned;
  for (uint64_t f = 1; f <= 6; ++f) {
    owned.push_back(chunk(f, 10 * kKiB));
    ASSERT_TRUE(rig.tier.insert(owned.back()));
  }
  auto g1 = rig.guest(101, 20 * kKiB), g2 = rig.guest(102, 20 * kKiB),
       g3 = rig.guest(103, 20 * kKiB);
  EXPECT_TRUE(rig.tier.insert(g1));
  EXPECT_TRUE(rig.tier.insert(g2));
  EXPECT_TRUE(rig.tier.insert(g3));  // g1, the coldest guest, goes; no owned chunk
  EXPECT_FALSE(has(rig.tier, g1));
  for (const auto& c : owned) EXPECT_TRUE(has(rig.tier, c));
  EXPECT_FALSE(rig.tier.insert(rig.guest(104, 50 * kKiB))) << "larger than the free room";
  EXPECT_EQ(rig.tier.owned().evictions, 0u);
  EXPECT_EQ(rig.tier.guests().evictions, 1u);

  // Owned chunks take the room back from the guests.
  auto o7 = chunk(7, 30 * kKiB);
  ASSERT_TRUE(rig.tier.insert(o7));
  EXPECT_FALSE(has(rig.tier, g2));
  EXPECT_FALSE(has(rig.tier, g3));
  EXPECT_EQ(rig.tier.owned().bytes, 90 * kKiB);
  EXPECT_EQ(rig.tier.guests().bytes, 0u);
  EXPECT_EQ(rig.tier.owned().evictions, 0u);
  // Only when the share exceeds the tier does an owned chunk go (LRU).
  ASSERT_TRUE(rig.tier.insert(chunk(8, 20 * kKiB)));
  EXPECT_EQ(rig.tier.owned().evictions, 1u);
  EXPECT_FALSE(has(rig.tier, owned[0]));
  EXPECT_LE(rig.tier.usage().bytesUsed, 100 * kKiB);
}

// Pass: a hit on a guest moves it to the front of the guests, never above an
// owned chunk: the owned chunks stay however often the guest is read.
TEST(RamTierClassesTest, AHitNeverLiftsAGuestAboveOwnedChunks) {
  Rig rig(60 * kKiB);
  auto g1 = rig.guest(101, 10 * kKiB), g2 = rig.guest(102, 10 * kKiB);
  ASSERT_TRUE(rig.tier.insert(g1));
  ASSERT_TRUE(rig.tier.insert(g2));
  EXPECT_NE(rig.tier.lookup(g1->key, g1->identity), nullptr);  // g1 hottest guest
  auto g3 = rig.guest(103, 10 * kKiB);
  std::vector<ChunkRef> owned;
  for (uint64_t f = 1; f <= 4; ++f) {
    owned.push_back(chunk(f, 10 * kKiB));
    ASSERT_TRUE(rig.tier.insert(owned.back()));
    EXPECT_NE(rig.tier.lookup(g1->key, g1->identity), nullptr);
  }
  // 40 KiB owned + 20 KiB guests = full; the next guest displaces g2 (cold).
  ASSERT_TRUE(rig.tier.insert(g3));
  EXPECT_TRUE(has(rig.tier, g1));
  EXPECT_FALSE(has(rig.tier, g2));
  // Owned chunks that were never read since still outrank the hot g1.
  ASSERT_TRUE(rig.tier.insert(chunk(5, 10 * kKiB)));
  ASSERT_TRUE(rig.tier.insert(chunk(6, 10 * kKiB)));
  for (const auto& c : owned) EXPECT_TRUE(has(rig.tier, c));
  EXPECT_FALSE(has(rig.tier, g1));
  EXPECT_FALSE(has(rig.tier, g3));
  EXPECT_EQ(rig.tier.owned().evictions, 0u);
}

// Pass: the guests get the free room plus the extra (the prefetch memory);
// the whole tier never holds more than capacity + extra.
TEST(RamTierClassesTest, GuestBudgetIsFreeRoomPlusExtra) {
  Rig rig(50 * kKiB, 20 * kKiB);
  for (uint64_t f = 1; f <= 5; ++f) ASSERT_TRUE(rig.tier.insert(chunk(f, 10 * kKiB)));
  for (uint64_t f = 101; f <= 104; ++f) ASSERT_TRUE(rig.tier.insert(rig.guest(f, 10 * kKiB)));
  EXPECT_EQ(rig.tier.owned().bytes, 50 * kKiB);
  EXPECT_EQ(rig.tier.guests().bytes, 20 * kKiB);
  EXPECT_EQ(rig.tier.usage().bytesUsed, 70 * kKiB);
  EXPECT_EQ(rig.tier.usage().capacityBytes, 70 * kKiB);
  EXPECT_EQ(rig.tier.guests().evictions, 2u);
}

// Pass: when placement changes, chunks change class in place (no copy is
// lost or re-read): a file that moved away becomes a guest, one that came
// here becomes owned; the budgets hold again afterwards (guests go first).
TEST(RamTierClassesTest, ReclassifyMovesChunksBetweenClassesInPlace) {
  Rig rig(40 * kKiB, 0);
  auto o1 = chunk(1, 10 * kKiB), o2 = chunk(2, 10 * kKiB), g = rig.guest(101, 10 * kKiB);
  ASSERT_TRUE(rig.tier.insert(o1));
  ASSERT_TRUE(rig.tier.insert(o2));
  ASSERT_TRUE(rig.tier.insert(g));
  rig.view.guests = {1};  // file 1 moved away, file 101 came here
  EXPECT_EQ(rig.tier.reclassify(), 2u);
  EXPECT_EQ(rig.tier.owned().chunks, 2u);
  EXPECT_EQ(rig.tier.guests().chunks, 1u);
  EXPECT_TRUE(has(rig.tier, o1) && has(rig.tier, o2) && has(rig.tier, g));
  EXPECT_NE(rig.tier.lookup(g->key, g->identity), nullptr);
  // Everything becomes owned and more than fits: the owned budget holds.
  ASSERT_TRUE(rig.tier.insert(rig.guest(102, 10 * kKiB)));
  ASSERT_TRUE(rig.tier.insert(chunk(3, 10 * kKiB)));
  rig.view.guests.clear();
  rig.lease = rig.tier.lendOwnership(rig.view);
  rig.tier.reclassify();
  EXPECT_LE(rig.tier.owned().bytes, 40 * kKiB);
  EXPECT_EQ(rig.tier.guests().bytes, 0u);
}

// Pass: staged guests (peer prefetch) stay within the extra and are not
// evicted for plain guests while fresh; a full staging room refuses the next
// one and stagingRoom() says so; demote (its read consumed) makes a staged
// guest a plain one; owned chunks take plain guests' room first; release drops
// a guest at once and only demotes an owned chunk.
TEST(RamTierClassesTest, StagedGuestsWaitForTheirRead) {
  Rig rig(40 * kKiB, 20 * kKiB);  // guests: 60 KiB while nothing is owned, staged: 20
  auto s1 = rig.guest(101, 10 * kKiB), s2 = rig.guest(102, 10 * kKiB);
  ASSERT_TRUE(rig.tier.stage(s1));
  EXPECT_EQ(rig.tier.stagingRoom(), 10 * kKiB);
  ASSERT_TRUE(rig.tier.stage(s2));
  EXPECT_EQ(rig.tier.stagingRoom(), 0u);
  EXPECT_FALSE(rig.tier.stage(rig.guest(103, 10 * kKiB)));
  EXPECT_EQ(rig.tier.staged().refused, 1u);
  std::vector<ChunkRef> plain;
  for (uint64_t f = 106; f <= 110; ++f) {
    plain.push_back(rig.guest(f, 10 * kKiB));
    ASSERT_TRUE(rig.tier.insert(plain.back()));
  }
  EXPECT_FALSE(has(rig.tier, plain[0])) << "the coldest plain guest goes, not a staged one";
  EXPECT_TRUE(has(rig.tier, s1) && has(rig.tier, s2));
  bool staged = false;
  EXPECT_NE(rig.tier.find(s1->key, s1->identity, &staged), nullptr);
  EXPECT_TRUE(staged);
  rig.tier.demote(s1->key);  // read consumed: a plain guest now
  EXPECT_NE(rig.tier.find(s1->key, s1->identity, &staged), nullptr);
  EXPECT_FALSE(staged);
  EXPECT_EQ(rig.tier.stagingRoom(), 10 * kKiB);
  auto o = chunk(1, 30 * kKiB);  // guests' budget drops to 30 KiB: three plain ones go
  ASSERT_TRUE(rig.tier.insert(o));
  EXPECT_TRUE(has(rig.tier, s2)) << "a staged guest went while plain ones were left";
  EXPECT_EQ(rig.tier.guests().bytes, 30 * kKiB);
  rig.tier.release(s2->key);
  EXPECT_FALSE(has(rig.tier, s2));
  rig.tier.release(o->key);
  EXPECT_TRUE(has(rig.tier, o)) << "release dropped an owned chunk";
  EXPECT_EQ(rig.tier.owned().bytes, 30 * kKiB);
  EXPECT_EQ(rig.tier.staged().admitted, 2u);
  EXPECT_EQ(rig.tier.owned().evictions, 0u);
}

// Pass: peer prefetch claiming a resident plain guest makes it staged (kept
// for its read); an owned chunk is not touched; staging room is at most the
// extra.
TEST(RamTierClassesTest, ClaimingAResidentGuestStagesIt) {
  Rig rig(40 * kKiB, 10 * kKiB);
  auto g = rig.guest(101, 10 * kKiB);
  auto o = chunk(1, 10 * kKiB);
  ASSERT_TRUE(rig.tier.insert(g));
  ASSERT_TRUE(rig.tier.insert(o));
  EXPECT_EQ(rig.tier.stagingRoom(), 10 * kKiB);
  rig.tier.claimStaged(g->key);
  rig.tier.claimStaged(o->key);
  EXPECT_EQ(rig.tier.staged().chunks, 1u);
  EXPECT_EQ(rig.tier.owned().chunks, 1u);
  bool staged = false;
  EXPECT_NE(rig.tier.find(g->key, g->identity, &staged), nullptr);
  EXPECT_TRUE(staged);
  EXPECT_EQ(rig.tier.stagingRoom(), 0u);
}

// Pass: a staged guest unread for staleAfter (its reader left the plan) gives
// way to a new one.
TEST(RamTierClassesTest, StaleStagedGuestsGiveWay) {
  Rig rig(20 * kKiB, 20 * kKiB, 0ms);
  auto s1 = rig.guest(101, 10 * kKiB), s2 = rig.guest(102, 10 * kKiB);
  ASSERT_TRUE(rig.tier.stage(s1));
  ASSERT_TRUE(rig.tier.stage(s2));
  EXPECT_GT(rig.tier.stagingRoom(), 0u);
  ASSERT_TRUE(rig.tier.stage(rig.guest(103, 10 * kKiB)));
  EXPECT_FALSE(has(rig.tier, s1)) << "the oldest staged guest goes first";
  EXPECT_EQ(rig.tier.staged().droppedUnread, 1u);
}

// Pass: without an ownership view everything is owned (a single node), and a
// version mismatch is never served from either class.
TEST(RamTierClassesTest, NoViewMeansOwnedAndVersionsAreChecked) {
  RamTier tier(40 * kKiB);
  auto c = chunk(1, 10 * kKiB);
  ASSERT_TRUE(tier.insert(c));
  EXPECT_EQ(tier.owned().chunks, 1u);
  EXPECT_EQ(tier.guests().chunks, 0u);
  FileIdentity other = c->identity;
  other.inode = 99;
  EXPECT_EQ(tier.lookup(c->key, other), nullptr);
  EXPECT_FALSE(tier.contains(c->key)) << "a stale version stays";
}

}  // namespace
}  // namespace epochfs::cache

namespace epochfs::cache {
namespace {

// A view whose answers flip while readers run (membership changes).
class FlippingOwnership : public OwnershipView {
 public:
  bool ownedHere(uint64_t fileId) const override {
    return ((fileId + flip.load(std::memory_order_relaxed)) % 3) != 0;
  }
  std::atomic<uint64_t> flip{0};
};

// Pass: 4 threads inserting, staging, reading, demoting and releasing while
// a fifth reclassifies under a changing view; the budgets hold at the end
// (owned ≤ capacity, everything ≤ capacity + extra, staged ≤ extra) and the
// per-class counts add up to the tier's.
TEST(RamTierClassesTest, BudgetsHoldUnderConcurrentUseAndReclassify) {
  constexpr uint64_t kCap = 2 * kKiB * 1024, kExtra = 512 * kKiB;
  FlippingOwnership view;
  RamTier tier(kCap, kExtra);
  const Lease lease = tier.lendOwnership(view);
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < 20000; ++i) {
        const uint64_t f = rng() % 600;
        auto c = chunk(f, 4 * kKiB + (f % 8) * kKiB);
        switch (rng() % 5) {
          case 0:
            tier.stage(c);
            break;
          case 1:
            tier.find(c->key, c->identity, nullptr);
            break;
          case 2:
            tier.demote(c->key);
            break;
          case 3:
            tier.release(c->key);
            break;
          default:
            tier.insert(c);
        }
      }
    });
  }
  std::thread flipper([&] {
    while (!stop.load()) {
      view.flip.fetch_add(1);
      tier.reclassify();
      std::this_thread::yield();
    }
  });
  for (auto& t : ts) t.join();
  stop.store(true);
  flipper.join();
  tier.reclassify();
  const auto owned = tier.owned(), guests = tier.guests();
  const auto staged = tier.staged();
  EXPECT_LE(owned.bytes, kCap);
  EXPECT_LE(owned.bytes + guests.bytes, kCap + kExtra);
  EXPECT_LE(staged.bytes, kExtra);
  EXPECT_EQ(owned.bytes + guests.bytes, tier.usage().bytesUsed);
  EXPECT_EQ(owned.chunks + guests.chunks, tier.usage().chunks);
}

}  // namespace
}  // namespace epochfs::cache
