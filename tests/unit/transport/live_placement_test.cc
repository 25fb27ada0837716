// LivePlacement: rendezvous over the live set without files; with files the
// bounded-load table of the live set once built (fit().ready), rendezvous
// while it is being built, and a table for an older live set never installed.
#include "transport/live_placement.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace epochfs::transport {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<LiveMember> members(uint32_t n, uint64_t capacity) {
  std::vector<LiveMember> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back({i, capacity});
  return out;
}

bool waitReady(const LivePlacement& p) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (!p.fit().ready) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(LivePlacement, RendezvousOverTheLiveSetWithoutFiles) {
  std::atomic<int> changes{0};
  LivePlacement p(0, 1, [&] { ++changes; });
  p.setLive(members(1, 0));
  EXPECT_FALSE(p.ownedElsewhere(42)) << "alone, this node owns everything";
  p.setLive(members(4, 0));
  EXPECT_EQ(changes.load(), 2);
  EXPECT_TRUE(p.fit().ready);
  EXPECT_TRUE(p.fit().fits) << "no files: nothing to fit";
  int elsewhere = 0;
  for (uint64_t f = 1; f <= 4000; ++f) {
    const auto o = p.owners(f);
    ASSERT_EQ(o.size(), 1u);
    EXPECT_EQ(o, rendezvousOwners(f, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}, 1));
    elsewhere += p.ownedElsewhere(f);
  }
  EXPECT_NEAR(elsewhere, 3000, 200) << "three quarters owned by the other three";
}

TEST(LivePlacement, TheTableOfTheLiveSetWithFiles) {
  std::atomic<int> changes{0};
  LivePlacement p(1, 1, [&] { ++changes; });
  std::vector<FileBytes> files;
  for (uint64_t i = 1; i <= 20000; ++i) files.push_back({i * 7919, 100000});
  p.setFilesPending(true);
  EXPECT_FALSE(p.fit().ready) << "files posted, not placed yet";
  EXPECT_TRUE(p.startPlacement(files));
  EXPECT_FALSE(p.startPlacement(files)) << "once";
  p.setFilesPending(false);
  p.setLive(members(4, 1ull << 30));
  ASSERT_TRUE(waitReady(p));
  const auto fit = p.fit();
  EXPECT_EQ(fit.datasetBytes, 20000ull * 100000);
  EXPECT_EQ(fit.liveCapacityBytes, 4ull << 30);
  EXPECT_TRUE(fit.fits);
  uint64_t owned = 0;
  for (uint32_t n = 0; n < 4; ++n) {
    EXPECT_GT(p.ownedBytes(n), 0u);
    owned += p.ownedBytes(n);
  }
  EXPECT_EQ(owned, fit.datasetBytes) << "the table places every byte once";
  // A member leaves: rendezvous over the three at once, their table later.
  p.setLive(members(3, 1ull << 30));
  ASSERT_TRUE(waitReady(p));
  EXPECT_EQ(p.ownedBytes(3), 0u);
  for (uint64_t f = 1; f <= 200; ++f) EXPECT_NE(p.owners(f * 7919)[0], 3u);
  EXPECT_GE(changes.load(), 2);
}

TEST(LivePlacement, DatasetLargerThanTheLiveCapacityDoesNotFit) {
  LivePlacement p(0, 1, nullptr);
  std::vector<FileBytes> files;
  for (uint64_t i = 1; i <= 1000; ++i) files.push_back({i, 1 << 20});
  ASSERT_TRUE(p.startPlacement(files));
  p.setLive(members(2, 256ull << 20));  // 512 MiB for 1,000 MiB
  EXPECT_FALSE(p.fit().fits) << "known before the table is built";
  ASSERT_TRUE(waitReady(p));
  EXPECT_FALSE(p.fit().fits);
}

}  // namespace
}  // namespace epochfs::transport
