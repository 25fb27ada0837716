// RamTier::setCapacity (cache/ram_tier.h): a daemon under memory pressure caps
// its tier. Checks that the cap is applied at once, that guests go before any
// owned chunk, that the reported capacity follows, and that a larger value
// grows the tier back only up to what it was built with.
#include <gtest/gtest.h>

#include <vector>

#include "cache/chunk.h"
#include "cache/ram_tier.h"

namespace epochfs::cache {
namespace {

constexpr uint64_t kKiB = 1024;

// Files numbered from 100 up are owned by another node (guests here).
class GuestsFrom100 : public OwnershipView {
 public:
  bool ownedHere(uint64_t fileId) const override { return fileId < 100; }
};

ChunkRef chunk(uint64_t fileId, size_t size) {
  FileIdentity id{.fileId = fileId, .size = size, .inode = fileId};
  return makeChunk(ChunkKey::make(7, fileId, 0), id, std::vector<char>(size, 'x'));
}

// Pass: 8 owned and 4 guests of 10 KiB in a 100 KiB tier with 20 KiB extra;
// capped at 90 KiB only guests go (the 80 KiB owned stay), capped at 50 KiB
// every guest and then owned chunks go down to 50 KiB; usage and the reported
// capacity follow; growing back admits again, never past the built budgets.
TEST(RamTierCapacityTest, ShrinksGuestsFirstThenOwnedAndGrowsBack) {
  GuestsFrom100 view;
  RamTier tier(100 * kKiB, 20 * kKiB);
  const Lease lease = tier.lendOwnership(view);
  std::vector<ChunkRef> owned, guests;
  for (uint64_t f = 1; f <= 8; ++f) owned.push_back(chunk(f, 10 * kKiB));
  for (uint64_t f = 101; f <= 104; ++f) guests.push_back(chunk(f, 10 * kKiB));
  for (const auto& c : owned) ASSERT_TRUE(tier.insert(c));
  for (const auto& c : guests) ASSERT_TRUE(tier.insert(c));
  EXPECT_EQ(tier.usage().bytesUsed, 120 * kKiB);
  EXPECT_EQ(tier.usage().capacityBytes, 120 * kKiB);

  tier.setCapacity(90 * kKiB);  // owned 80 KiB fit; guests get 10 KiB
  EXPECT_EQ(tier.usage().capacityBytes, 90 * kKiB);
  EXPECT_EQ(tier.owned().bytes, 80 * kKiB);
  EXPECT_LE(tier.guests().bytes, 10 * kKiB);
  for (const auto& c : owned) EXPECT_TRUE(tier.contains(c->key));

  tier.setCapacity(50 * kKiB);
  EXPECT_EQ(tier.guests().bytes, 0u);
  EXPECT_EQ(tier.owned().bytes, 50 * kKiB);
  EXPECT_EQ(tier.owned().evictions, 3u);
  // Capped: a new owned chunk displaces one, never grows the tier.
  ASSERT_TRUE(tier.insert(chunk(9, 10 * kKiB)));
  EXPECT_EQ(tier.usage().bytesUsed, 50 * kKiB);

  tier.setCapacity(1ull << 40);  // back to the built budgets, no further
  EXPECT_EQ(tier.usage().capacityBytes, 120 * kKiB);
  for (uint64_t f = 10; f <= 14; ++f) ASSERT_TRUE(tier.insert(chunk(f, 10 * kKiB)));
  EXPECT_EQ(tier.owned().bytes, 100 * kKiB);
  ASSERT_TRUE(tier.insert(chunk(15, 10 * kKiB)));
  EXPECT_EQ(tier.owned().bytes, 100 * kKiB);
}

// Pass: a cap of 0 empties the tier and refuses inserts until it grows.
TEST(RamTierCapacityTest, ZeroEmptiesAndRefuses) {
  RamTier tier(64 * kKiB);
  ASSERT_TRUE(tier.insert(chunk(1, 10 * kKiB)));
  tier.setCapacity(0);
  EXPECT_EQ(tier.usage().bytesUsed, 0u);
  EXPECT_FALSE(tier.insert(chunk(2, 10 * kKiB)));
  tier.setCapacity(64 * kKiB);
  EXPECT_TRUE(tier.insert(chunk(2, 10 * kKiB)));
}

}  // namespace
}  // namespace epochfs::cache
