// Fitting the daemon into its memory limit (fusefs/daemon/memory_limit.h:
// fitRamCache, the receive pool and margin sizes, the cgroup working set from
// fake v1 and v2 files) and the pressure watcher
// (fusefs/daemon/memory_pressure_watcher.h): its policy, and a real RamTier
// capped and grown back by it from a fake sampler.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk.h"
#include "cache/chunk_buffer_pool.h"
#include "cache/ram_tier.h"
#include "fusefs/daemon/memory_limit.h"
#include "fusefs/daemon/memory_pressure_watcher.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// Pass: the pool is 1/32 of the limit within 4..32 MiB, the margin 1/16
// within 8..256 MiB.
TEST(MemoryFit, PoolAndMarginScaleWithTheLimit) {
  EXPECT_EQ(receivePoolBytesFor(100 * kMiB), 4 * kMiB);
  EXPECT_EQ(receivePoolBytesFor(320 * kMiB), 10 * kMiB);
  EXPECT_EQ(receivePoolBytesFor(64 * kGiB), 32 * kMiB);
  EXPECT_EQ(pressureMarginBytes(100 * kMiB), 8 * kMiB);
  EXPECT_EQ(pressureMarginBytes(320 * kMiB), 20 * kMiB);
  EXPECT_EQ(pressureMarginBytes(64 * kGiB), 256 * kMiB);
}

// Pass: the daemon alone must fit: a 100 MiB node (the lab's p = 8) fits
// --ram-cache 73.5 MiB beside 16 + 4 + 6.25 MiB of fixed costs, 75 MiB does
// not (clamped to 73.75); a host-sized limit never clamps; a limit below the
// fixed costs gives 0.
TEST(MemoryFit, RamCacheClampedToWhatTheFixedCostsLeave) {
  const uint64_t limit8 = 100 * kMiB, extra8 = limit8 / 16, pool8 = receivePoolBytesFor(limit8);
  const RamCacheFit fits = fitRamCache(limit8, 73 * kMiB + kMiB / 2, extra8, pool8);
  EXPECT_FALSE(fits.clamped);
  EXPECT_EQ(fits.ramCacheBytes, 73 * kMiB + kMiB / 2);
  EXPECT_EQ(fits.fixedBytes, kDaemonBaseBytes + 4 * kMiB + extra8);
  const RamCacheFit over = fitRamCache(limit8, 75 * kMiB, extra8, pool8);
  EXPECT_TRUE(over.clamped);
  EXPECT_EQ(over.ramCacheBytes, limit8 - over.fixedBytes);
  EXPECT_EQ(over.ramCacheBytes, 73 * kMiB + 3 * kMiB / 4);

  EXPECT_FALSE(fitRamCache(64 * kGiB, 16 * kGiB, 256 * kMiB, 32 * kMiB).clamped);
  const RamCacheFit tiny = fitRamCache(12 * kMiB, 8 * kMiB, 0, 0);
  EXPECT_TRUE(tiny.clamped);
  EXPECT_EQ(tiny.ramCacheBytes, 0u);
}

class FakeCgroupUsage : public ::testing::Test {
 protected:
  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  testing::ScopedTempDir dir_{"epochfs-mempressure"};
  const std::string root_ = dir_.path();
};

// Pass: v1 reads memory.usage_in_bytes less total_inactive_file (not the
// cgroup's own inactive_file), from the limit file's directory.
TEST_F(FakeCgroupUsage, V1WorkingSetIsUsageLessTotalInactiveFile) {
  const std::string dir = root_ + "/memory/job/node0";
  write(dir + "/memory.usage_in_bytes", "209715200\n");
  write(dir + "/memory.stat",
        "cache 10485760\nrss 100\ninactive_file 1048576\nactive_file 5\n"
        "total_cache 12582912\ntotal_inactive_file 8388608\n");
  const CgroupUsageFiles f = cgroupUsageFiles(dir + "/memory.limit_in_bytes");
  EXPECT_EQ(f.usageFile, dir + "/memory.usage_in_bytes");
  EXPECT_EQ(f.inactiveFileKey, "total_inactive_file");
  uint64_t ws = 0;
  ASSERT_TRUE(readCgroupWorkingSet(f, &ws));
  EXPECT_EQ(ws, 200 * kMiB - 8 * kMiB);
}

// Pass: v2 reads memory.current less inactive_file; a missing stat file
// counts as no page cache; a missing usage file, or no cgroup, is unreadable.
TEST_F(FakeCgroupUsage, V2WorkingSetAndUnreadableFiles) {
  const std::string dir = root_ + "/unified/job";
  write(dir + "/memory.current", "104857600\n");
  write(dir + "/memory.stat", "anon 90000000\nfile 14857600\ninactive_file 4194304\n");
  const CgroupUsageFiles f = cgroupUsageFiles(dir + "/memory.max");
  EXPECT_EQ(f.usageFile, dir + "/memory.current");
  EXPECT_EQ(f.inactiveFileKey, "inactive_file");
  uint64_t ws = 0;
  ASSERT_TRUE(readCgroupWorkingSet(f, &ws));
  EXPECT_EQ(ws, 96 * kMiB);
  fs::remove(dir + "/memory.stat");
  ASSERT_TRUE(readCgroupWorkingSet(f, &ws));
  EXPECT_EQ(ws, 100 * kMiB);
  fs::remove(dir + "/memory.current");
  EXPECT_FALSE(readCgroupWorkingSet(f, &ws));
  EXPECT_TRUE(cgroupUsageFiles("").empty());
  EXPECT_FALSE(readCgroupWorkingSet(cgroupUsageFiles(""), &ws));
}

// Pass: with less than a margin free the cap drops below what the tier holds
// by the shortfall plus half a margin; between one and two margins free it
// stays; beyond two it grows into the excess, never past the configured size.
TEST(MemoryPressurePolicyTest, ShrinksBelowTheMarginGrowsAboveTwo) {
  MemoryPressurePolicy p{200 * kMiB, 160 * kMiB, 12 * kMiB};
  // 196 MiB used: 4 free, 8 short, + 6: the tier (150 held) goes to 136.
  EXPECT_EQ(p.nextCap(196 * kMiB, 150 * kMiB, 160 * kMiB), 136 * kMiB);
  // Held is the smaller of cap and use.
  EXPECT_EQ(p.nextCap(196 * kMiB, 150 * kMiB, 140 * kMiB), 126 * kMiB);
  // Over the limit (usage can exceed it briefly): all of the excess is short.
  EXPECT_EQ(p.nextCap(210 * kMiB, 100 * kMiB, 160 * kMiB), 100 * kMiB - 28 * kMiB);
  EXPECT_EQ(p.nextCap(199 * kMiB, 10 * kMiB, 160 * kMiB), 0u);
  // 20 free: within [12, 24], unchanged.
  EXPECT_EQ(p.nextCap(180 * kMiB, 120 * kMiB, 130 * kMiB), 130 * kMiB);
  // 40 free: the tier may grow by 16 beyond its use.
  EXPECT_EQ(p.nextCap(160 * kMiB, 120 * kMiB, 130 * kMiB), 136 * kMiB);
  // A cap above that stays; the configured size bounds growth.
  EXPECT_EQ(p.nextCap(160 * kMiB, 120 * kMiB, 140 * kMiB), 140 * kMiB);
  EXPECT_EQ(p.nextCap(20 * kMiB, 120 * kMiB, 130 * kMiB), 160 * kMiB);
}

cache::ChunkRef chunk(uint64_t fileId, size_t size) {
  cache::FileIdentity id{.fileId = fileId, .size = size, .inode = fileId};
  return cache::makeChunk(cache::ChunkKey::make(7, fileId, 0), id, std::vector<char>(size, 'x'));
}

// Pass: a tier of 24 x 1 MiB (one shard: all fit) in a 50 MiB "cgroup" whose
// other processes take 22 MiB: the watcher caps the tier (chunks evicted,
// capacity reported lower) so that 1.5 margins are free; when they leave it
// grows back to the configured size and the tier admits again; unreadable
// samples change nothing. Its figures (stats.memory.pressure) count each
// shrink, keep the lowest cap and the last readable working set.
TEST(MemoryPressureWatcherTest, CapsTheTierUnderPressureAndGrowsBack) {
  cache::RamTier tier(24 * kMiB);
  for (uint64_t f = 1; f <= 24; ++f) ASSERT_TRUE(tier.insert(chunk(f, kMiB)));
  ASSERT_EQ(tier.usage().bytesUsed, 24 * kMiB);
  uint64_t others = 22 * kMiB;
  bool readable = true;
  MemoryPressurePolicy policy{50 * kMiB, 24 * kMiB, 8 * kMiB};
  MemoryPressureWatcher w(
      tier, policy,
      [&](uint64_t* ws) {
        *ws = others + tier.usage().bytesUsed;
        return readable;
      },
      "fake/memory.limit_in_bytes");
  EXPECT_EQ(w.shrinks(), 0u);
  EXPECT_EQ(w.lowestCapBytes(), 24 * kMiB);
  EXPECT_EQ(w.workingSetBytes(), 0u);
  w.pollOnce();  // 46 MiB of 50: 4 free, 4 short of the margin + 4
  EXPECT_EQ(tier.usage().capacityBytes, 16 * kMiB);
  EXPECT_EQ(tier.usage().bytesUsed, 16 * kMiB);
  EXPECT_EQ(w.shrinks(), 1u);
  EXPECT_EQ(w.lowestCapBytes(), 16 * kMiB);
  EXPECT_EQ(w.workingSetBytes(), 46 * kMiB);
  w.pollOnce();  // 12 free: steady
  EXPECT_EQ(tier.usage().capacityBytes, 16 * kMiB);
  EXPECT_EQ(w.shrinks(), 1u);
  EXPECT_EQ(w.workingSetBytes(), 38 * kMiB);

  readable = false;
  others = 90 * kMiB;
  w.pollOnce();
  EXPECT_EQ(tier.usage().capacityBytes, 16 * kMiB);
  EXPECT_EQ(w.workingSetBytes(), 38 * kMiB);
  readable = true;
  w.pollOnce();  // 106 of 50: 68 short, more than the tier holds
  EXPECT_EQ(tier.usage().bytesUsed, 0u);
  EXPECT_FALSE(tier.insert(chunk(100, kMiB)));
  EXPECT_EQ(w.shrinks(), 2u);
  EXPECT_EQ(w.lowestCapBytes(), 0u);

  others = 10 * kMiB;
  w.pollOnce();  // 40 free: grows by 24, the configured size
  EXPECT_EQ(tier.usage().capacityBytes, 24 * kMiB);
  EXPECT_TRUE(tier.insert(chunk(100, kMiB)));
  // Growing back is no shrink; the lowest cap stays.
  EXPECT_EQ(w.shrinks(), 2u);
  EXPECT_EQ(w.lowestCapBytes(), 0u);
  EXPECT_EQ(w.workingSetBytes(), 10 * kMiB);
}

// Pass: the chunk-buffer pool keeps nothing idle while the tier is capped (its
// idle buffers freed at the first shrink, its limit 0) and gets its limit
// back when the tier is whole again.
TEST(MemoryPressureWatcherTest, EmptiesTheChunkBufferPoolWhileTheTierIsCapped) {
  cache::ChunkBufferPool& pool = cache::ChunkBufferPool::global();
  pool.setLimits(8 * kMiB, kMiB);
  { cache::ChunkBuffer b = cache::ChunkBuffer::pageAligned(kMiB); }  // idle in the pool
  ASSERT_EQ(pool.stats().idleBytes, kMiB);
  cache::RamTier tier(16 * kMiB);
  for (uint64_t f = 1; f <= 16; ++f) ASSERT_TRUE(tier.insert(chunk(f, kMiB)));
  uint64_t others = 30 * kMiB;
  MemoryPressureWatcher w(
      tier, MemoryPressurePolicy{50 * kMiB, 16 * kMiB, 8 * kMiB},
      [&](uint64_t* ws) {
        *ws = others + tier.usage().bytesUsed;
        return true;
      },
      "fake");
  w.pollOnce();  // 46 of 50: shrinks
  ASSERT_EQ(w.shrinks(), 1u);
  EXPECT_EQ(pool.idleLimit(), 0u);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  others = 0;
  w.pollOnce();  // 50 free: whole again
  EXPECT_EQ(tier.usage().capacityBytes, 16 * kMiB);
  EXPECT_EQ(pool.idleLimit(), 8 * kMiB);
  pool.setLimits(0, cache::ChunkBufferPool::kDefaultMaxBufferBytes);
}

// Pass: the thread polls on its own and stops promptly.
TEST(MemoryPressureWatcherTest, ThreadPollsAndStops) {
  cache::RamTier tier(16 * kMiB);
  for (uint64_t f = 1; f <= 16; ++f) ASSERT_TRUE(tier.insert(chunk(f, kMiB)));
  MemoryPressureWatcher w(
      tier, MemoryPressurePolicy{20 * kMiB, 16 * kMiB, 8 * kMiB},
      [&](uint64_t* ws) {
        *ws = 8 * kMiB + tier.usage().bytesUsed;
        return true;
      },
      "fake", std::chrono::milliseconds(1));
  w.start();
  for (int i = 0; i < 2000 && tier.usage().bytesUsed > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  w.stop();
  // 8 + 16 of 20, margin 8: 16 short (4 over + 12 to free), all of it goes;
  // then 12 free, within [8, 16]: steady.
  EXPECT_EQ(tier.usage().bytesUsed, 0u);
  EXPECT_EQ(w.shrinks(), 1u);
}

}  // namespace
}  // namespace epochfs::fusefs
