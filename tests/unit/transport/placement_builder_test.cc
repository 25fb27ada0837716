// PlacementBuilder: tables are built on the builder's thread, the latest
// request is always built (older pending ones may be skipped), and the
// destructor returns with no build left running.
#include "transport/placement_builder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace epochfs::transport {
namespace {

TEST(PlacementBuilder, BuildsTheLatestRequestOffTheCallersThread) {
  std::vector<FileBytes> files;
  for (uint64_t i = 1; i <= 20000; ++i) files.push_back({i * 7919, 100000});
  std::mutex mu;
  uint64_t lastGeneration = 0;
  size_t lastLive = 0;
  std::thread::id builtOn;
  std::atomic<int> builds{0};
  {
    PlacementBuilder b(files, 1, [&](std::shared_ptr<const PlacementTable> t, uint64_t g) {
      std::lock_guard<std::mutex> lock(mu);
      lastGeneration = g;
      lastLive = 0;
      for (uint32_t n = 0; n < 8; ++n) lastLive += t->ownedBytes(n) > 0;
      builtOn = std::this_thread::get_id();
      ++builds;
    });
    for (uint64_t g = 1; g <= 8; ++g) {
      std::vector<Candidate> live;
      std::vector<uint64_t> caps;
      for (uint32_t n = 0; n < g; ++n) {
        live.push_back({n, 1.0});
        caps.push_back(uint64_t{1} << 40);
      }
      b.request(live, caps, g);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (lastGeneration == 8) break;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "the latest request was not built";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_EQ(lastLive, 8u) << "the table of the latest live set (8 nodes) came last";
  EXPECT_NE(builtOn, std::this_thread::get_id());
  EXPECT_GE(builds.load(), 1);
  EXPECT_LE(builds.load(), 8);
}

}  // namespace
}  // namespace epochfs::transport
