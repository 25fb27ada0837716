// Unit tests for RamTier: hits and misses, version mismatch, LRU order,
// capacity bound, sharding and concurrent use.
#include "cache/ram_tier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace epochfs::cache {
namespace {

constexpr uint64_t kDataset = 7;

FileIdentity identityFor(uint64_t fileId, int64_t mtime = 100) {
  return FileIdentity{fileId, 1 << 20, mtime, mtime, 1000 + fileId};
}

ChunkRef chunkOf(uint64_t fileId, uint32_t index, size_t bytes, int64_t mtime = 100) {
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>((fileId * 31 + index + i) & 0xff);
  return makeChunk(ChunkKey::make(kDataset, fileId, index), identityFor(fileId, mtime),
                   std::move(data));
}

ChunkKey keyOf(uint64_t fileId, uint32_t index) { return ChunkKey::make(kDataset, fileId, index); }

TEST(RamTierTest, HitAndMiss) {
  RamTier tier(1 << 20);
  ChunkRef c = chunkOf(1, 0, 1000);
  EXPECT_EQ(tier.lookup(c->key, c->identity), nullptr);
  EXPECT_FALSE(tier.contains(c->key));
  ASSERT_TRUE(tier.insert(c));
  EXPECT_TRUE(tier.contains(c->key));
  ChunkRef got = tier.lookup(c->key, c->identity);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got.get(), c.get());  // shared, not copied
  EXPECT_EQ(tier.lookup(keyOf(1, 1), c->identity), nullptr);
  TierUsage u = tier.usage();
  EXPECT_EQ(u.bytesUsed, 1000u);
  EXPECT_EQ(u.capacityBytes, 1u << 20);
  EXPECT_EQ(u.chunks, 1u);
  EXPECT_EQ(u.evictions, 0u);
}

TEST(RamTierTest, IdentityMismatchMissesAndDrops) {
  RamTier tier(1 << 20);
  ChunkRef c = chunkOf(1, 0, 1000, /*mtime=*/100);
  ASSERT_TRUE(tier.insert(c));
  EXPECT_EQ(tier.lookup(c->key, identityFor(1, /*mtime=*/200)), nullptr);
  EXPECT_FALSE(tier.contains(c->key));  // the old version is gone
  EXPECT_EQ(tier.lookup(c->key, c->identity), nullptr);
  EXPECT_EQ(tier.usage().bytesUsed, 0u);
}

TEST(RamTierTest, InsertReplacesSameKey) {
  RamTier tier(1 << 20);
  ASSERT_TRUE(tier.insert(chunkOf(1, 0, 1000, 100)));
  ChunkRef newer = chunkOf(1, 0, 3000, 200);
  ASSERT_TRUE(tier.insert(newer));
  EXPECT_EQ(tier.lookup(newer->key, identityFor(1, 100)), nullptr);
  ASSERT_TRUE(tier.insert(newer));
  EXPECT_EQ(tier.lookup(newer->key, newer->identity), newer);
  TierUsage u = tier.usage();
  EXPECT_EQ(u.chunks, 1u);
  EXPECT_EQ(u.bytesUsed, 3000u);
}

TEST(RamTierTest, EvictsLeastRecentlyUsed) {
  RamTier tier(4000);
  ASSERT_EQ(tier.shardCount(), 1u);
  for (uint64_t f = 1; f <= 4; ++f) ASSERT_TRUE(tier.insert(chunkOf(f, 0, 1000)));
  // Touch 1 and 3: the LRU order becomes 2, 4, 1, 3.
  ASSERT_NE(tier.lookup(keyOf(1, 0), identityFor(1)), nullptr);
  ASSERT_NE(tier.lookup(keyOf(3, 0), identityFor(3)), nullptr);
  ASSERT_TRUE(tier.insert(chunkOf(5, 0, 1000)));
  EXPECT_FALSE(tier.contains(keyOf(2, 0)));
  EXPECT_TRUE(tier.contains(keyOf(4, 0)));
  ASSERT_TRUE(tier.insert(chunkOf(6, 0, 2000)));  // needs two evictions: 4, then 1
  EXPECT_FALSE(tier.contains(keyOf(4, 0)));
  EXPECT_FALSE(tier.contains(keyOf(1, 0)));
  EXPECT_TRUE(tier.contains(keyOf(3, 0)));
  EXPECT_TRUE(tier.contains(keyOf(5, 0)));
  EXPECT_TRUE(tier.contains(keyOf(6, 0)));
  TierUsage u = tier.usage();
  EXPECT_EQ(u.evictions, 3u);
  EXPECT_EQ(u.bytesUsed, 4000u);
}

TEST(RamTierTest, RefusesChunkLargerThanCapacity) {
  RamTier tier(1000);
  EXPECT_FALSE(tier.insert(chunkOf(1, 0, 1001)));
  EXPECT_FALSE(tier.insert(nullptr));
  EXPECT_TRUE(tier.insert(chunkOf(1, 0, 1000)));
  EXPECT_EQ(tier.usage().chunks, 1u);
}

TEST(RamTierTest, OneMiBChunkFitsInOneMiB) {
  RamTier tier(1 << 20);
  EXPECT_GE(tier.maxChunkBytes(), 1u << 20);
  EXPECT_TRUE(tier.insert(chunkOf(1, 0, 1 << 20)));
  EXPECT_TRUE(tier.insert(chunkOf(2, 0, 1 << 20)));  // evicts the first
  EXPECT_FALSE(tier.contains(keyOf(1, 0)));
  EXPECT_TRUE(tier.contains(keyOf(2, 0)));
}

TEST(RamTierTest, ShardsLargeCaches) {
  RamTier big(1ull << 30);
  EXPECT_EQ(big.shardCount(), RamTier::kMaxShards);
  EXPECT_GE(big.maxChunkBytes(), RamTier::kMinShardBytes);
  RamTier small(RamTier::kMinShardBytes * 2 - 1);
  EXPECT_EQ(small.shardCount(), 1u);
}

// shardIndex is where a chunk lives: a 2-shard tier fills one shard while the
// other has room. Fewer shards take the low bits of the index among
// kMaxShards (what chunk_shards tells epochctl mrc).
TEST(RamTierTest, ShardIndexPlacesChunks) {
  for (uint64_t h : {0x0ull, 0x123456789abcdef0ull, ~0ull, 0xfedcba9876543210ull}) {
    for (size_t n = 1; n <= RamTier::kMaxShards; n *= 2) {
      EXPECT_EQ(RamTier::shardIndex(h, n), RamTier::shardIndex(h, RamTier::kMaxShards) & (n - 1));
    }
  }
  RamTier tier(2 * RamTier::kMinShardBytes);
  ASSERT_EQ(tier.shardCount(), 2u);
  std::vector<uint64_t> inShard[2];
  for (uint64_t f = 0; inShard[0].size() < 40 || inShard[1].size() < 4; ++f) {
    inShard[RamTier::shardIndex(keyOf(f, 0).hash, 2)].push_back(f);
  }
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(tier.insert(chunkOf(inShard[1][i], 0, 1 << 20)));
  // 33 MiB into a 32 MiB shard while the tier as a whole has room.
  for (int i = 0; i < 33; ++i) ASSERT_TRUE(tier.insert(chunkOf(inShard[0][i], 0, 1 << 20)));
  EXPECT_FALSE(tier.contains(keyOf(inShard[0][0], 0)));
  EXPECT_TRUE(tier.contains(keyOf(inShard[0][32], 0)));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(tier.contains(keyOf(inShard[1][i], 0)));
  EXPECT_EQ(tier.usage().evictions, 1u);
}

TEST(RamTierTest, CapacityNeverExceeded) {
  constexpr uint64_t kCap = 128 << 20;  // 4 shards of 32 MiB
  RamTier tier(kCap);
  ASSERT_EQ(tier.shardCount(), 4u);
  std::mt19937_64 rng(1);
  for (uint32_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(tier.insert(chunkOf(i, 0, (rng() % (1 << 20)) + 1)));
    ASSERT_LE(tier.usage().bytesUsed, kCap);
  }
  EXPECT_GT(tier.usage().evictions, 0u);
}

TEST(RamTierTest, EraseAndClear) {
  RamTier tier(1 << 20);
  for (uint64_t f = 1; f <= 10; ++f) ASSERT_TRUE(tier.insert(chunkOf(f, 0, 100)));
  tier.erase(keyOf(3, 0));
  tier.erase(keyOf(99, 0));  // absent: no-op
  EXPECT_FALSE(tier.contains(keyOf(3, 0)));
  EXPECT_EQ(tier.usage().chunks, 9u);
  tier.clear();
  TierUsage u = tier.usage();
  EXPECT_EQ(u.chunks, 0u);
  EXPECT_EQ(u.bytesUsed, 0u);
  EXPECT_EQ(u.evictions, 0u);
  EXPECT_TRUE(tier.insert(chunkOf(1, 0, 100)));  // usable after clear
  EXPECT_NE(tier.lookup(keyOf(1, 0), identityFor(1)), nullptr);
}

TEST(RamTierTest, ConcurrentInsertAndLookup) {
  constexpr uint64_t kCap = 64 << 20;
  RamTier tier(kCap);
  std::atomic<int> bad{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 2000; ++i) {
        uint64_t f = rng() % 700;  // ~90 MiB of distinct chunks: evictions happen
        if (rng() % 3 == 0) {
          if (!tier.insert(chunkOf(f, 0, 128 * 1024 + f))) bad++;
        } else if (ChunkRef c = tier.lookup(keyOf(f, 0), identityFor(f))) {
          hits++;
          if (c->key.fileId != f || c->size() != 128 * 1024 + f || !c->verify()) bad++;
        }
        if (i % 500 == 0 && tier.usage().bytesUsed > kCap) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_LE(tier.usage().bytesUsed, kCap);
  EXPECT_GT(tier.usage().evictions, 0u);
}

}  // namespace
}  // namespace epochfs::cache
