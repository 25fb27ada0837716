// AllocatorTrimmer: freed memory held in glibc's arenas beyond the slack goes
// back to the kernel; within the slack nothing happens.
#include "fusefs/daemon/allocator_trimmer.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "cache/chunk_buffer.h"
#include "cache/chunk_buffer_pool.h"
#include "fusefs/daemon/memory_limit.h"

namespace epochfs::fusefs {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // the sanitizers' allocators bypass glibc's arenas
#else
constexpr bool kSanitized = false;
#endif

TEST(AllocatorTrimmer, SlackIsASixteenthOfTheTierAndAtLeast16MiB) {
  EXPECT_EQ(AllocatorTrimmer::slackFor(0), uint64_t{16} << 20);
  EXPECT_EQ(AllocatorTrimmer::slackFor(uint64_t{64} << 20), uint64_t{16} << 20);
  EXPECT_EQ(AllocatorTrimmer::slackFor(uint64_t{1} << 30), uint64_t{64} << 20);
}

// Holes like the ones evictions leave: 96 MiB of 100 KB buffers (below the
// mmap threshold the daemon pins, so they come from the heap), every other
// one freed, so the heap's top stays in use and glibc keeps the holes.
TEST(AllocatorTrimmer, FreedHolesBeyondTheSlackGoBackToTheKernel) {
  if (kSanitized) GTEST_SKIP() << "glibc's arenas are not in use under a sanitizer";
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  std::vector<char*> blocks;
  for (int i = 0; i < 960; ++i) {
    char* p = static_cast<char*>(std::malloc(100 * 1000));
    std::memset(p, 1, 100 * 1000);  // resident
    blocks.push_back(p);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) std::free(blocks[i]), blocks[i] = nullptr;
  const size_t held = mallinfo2().fordblks;
  ASSERT_GT(held, size_t{40} << 20) << "the holes are free memory the arenas hold";

  AllocatorTrimmer generous(held + (size_t{1} << 20));
  EXPECT_FALSE(generous.pollOnce()) << "within the slack: no trim";
  EXPECT_EQ(generous.trims(), 0u);

  const uint64_t before = currentRssBytes();
  AllocatorTrimmer tight(size_t{16} << 20);
  EXPECT_TRUE(tight.pollOnce());
  EXPECT_EQ(tight.trims(), 1u);
  // glibc still counts the bytes as free; the kernel no longer has them.
  const uint64_t after = currentRssBytes();
  EXPECT_GT(before, after + (uint64_t{32} << 20))
      << "RSS " << before / 1048576 << " -> " << after / 1048576 << " MiB";
  for (char* p : blocks) std::free(p);
}

TEST(AllocatorTrimmer, StartsAndStopsItsThread) {
  AllocatorTrimmer t(uint64_t{1} << 40, std::chrono::milliseconds(1));
  t.start();
  t.stop();
  t.stop();  // twice is fine
  EXPECT_EQ(t.trims(), 0u);
}

// Pass: each poll frees the chunk buffers that sat idle in the pool for the
// whole period since the previous poll, and keeps those reused in it.
TEST(AllocatorTrimmer, ReleasesChunkBuffersIdleForAPeriod) {
  cache::ChunkBufferPool& pool = cache::ChunkBufferPool::global();
  pool.setLimits(8u << 20, 1u << 20);
  constexpr size_t kSize = 256 * 1024;
  {
    std::vector<cache::ChunkBuffer> freed;
    for (int i = 0; i < 4; ++i) freed.push_back(cache::ChunkBuffer::pageAligned(kSize));
  }
  const size_t idle = pool.stats().idleBytes;
  ASSERT_EQ(idle, 4 * pool.capacityFor(kSize));
  AllocatorTrimmer trimmer(uint64_t{1} << 40);  // never trims glibc: only the pool
  trimmer.pollOnce();                           // a period starts
  { cache::ChunkBuffer reused = cache::ChunkBuffer::pageAligned(kSize); }
  trimmer.pollOnce();  // 3 sat idle throughout; the reused one stays
  EXPECT_EQ(pool.stats().idleBytes, pool.capacityFor(kSize));
  trimmer.pollOnce();  // and goes once it too sits a period
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  pool.setLimits(0, cache::ChunkBufferPool::kDefaultMaxBufferBytes);
}

}  // namespace
}  // namespace epochfs::fusefs
