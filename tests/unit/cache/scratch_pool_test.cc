// cache/scratch_pool: aligned bounce buffers, at most maxIdle kept.
#include "cache/scratch_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace epochfs::cache {
namespace {

// Pass: leases are aligned, at least the size asked, reused when returned,
// and no more than maxIdle stay in the pool after many concurrent leases.
TEST(ScratchPool, AlignedReusedAndIdleBounded) {
  ScratchPool pool(4096, 2);
  char* first = nullptr;
  {
    auto a = pool.acquire(5000);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
    std::memset(a.data(), 1, 8192);  // rounded up to the alignment
    first = a.data();
  }
  EXPECT_EQ(pool.idleCount(), 1u);
  {
    auto b = pool.acquire(4096);
    EXPECT_EQ(b.data(), first);  // reused
    EXPECT_EQ(pool.idleCount(), 0u);
  }
  {
    std::vector<ScratchPool::Lease> many;
    for (int i = 0; i < 10; ++i) many.push_back(pool.acquire(1 << 20));
    for (auto& l : many) ASSERT_NE(l.data(), nullptr);
  }
  EXPECT_EQ(pool.idleCount(), 2u);
  // A buffer too small for the request is not handed out.
  auto big = pool.acquire(4 << 20);
  ASSERT_NE(big.data(), nullptr);
  std::memset(big.data(), 2, 4 << 20);
  EXPECT_EQ(pool.idleCount(), 2u);
}

// Pass: threads leasing and returning concurrently never share a buffer.
TEST(ScratchPool, ConcurrentLeasesAreExclusive) {
  ScratchPool pool(4096, 4);
  std::vector<std::thread> threads;
  std::atomic<int> clobbered{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto l = pool.acquire(8192);
        std::memset(l.data(), t, 8192);
        std::this_thread::yield();
        for (int k = 0; k < 8192; k += 512) {
          if (l.data()[k] != static_cast<char>(t)) clobbered.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clobbered.load(), 0);
  EXPECT_LE(pool.idleCount(), 4u);
}

}  // namespace
}  // namespace epochfs::cache
