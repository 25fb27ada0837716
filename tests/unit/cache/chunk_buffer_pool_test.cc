// cache/chunk_buffer_pool: freed page-aligned chunk buffers kept for reuse,
// within a bound, by size class.
#include "cache/chunk_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cache/chunk_buffer.h"

namespace epochfs::cache {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

char* fresh(size_t capacity) {
  return static_cast<char*>(std::aligned_alloc(ChunkBufferPool::kPageBytes, capacity));
}

// A take that must find a block of exactly `capacity` bytes (or none).
char* take(ChunkBufferPool& pool, size_t capacity) {
  size_t taken = 0;
  char* b = pool.take(capacity, &taken);
  EXPECT_EQ(taken, b == nullptr ? 0 : capacity);
  return b;
}

// Pass: with the pool off every size is only page-rounded; with it on, sizes
// from 64 KiB to the maximum get a class capacity (whole pages to 128 KiB,
// then at most 1/16 above the page-rounded size), and sizes outside bypass.
TEST(ChunkBufferPool, CapacityClasses) {
  ChunkBufferPool off(0);
  EXPECT_EQ(off.capacityFor(1), 4 * kKiB);
  EXPECT_EQ(off.capacityFor(200 * kKiB + 1), 204 * kKiB);

  ChunkBufferPool on(8 * kMiB);
  EXPECT_EQ(on.capacityFor(10 * kKiB), 12 * kKiB);               // below 64 KiB: pages
  EXPECT_EQ(on.capacityFor(110 * 1000), 108 * kKiB);             // pages up to 128 KiB
  EXPECT_EQ(on.capacityFor(129 * kKiB), 136 * kKiB);             // 8 KiB steps above
  EXPECT_EQ(on.capacityFor(600 * kKiB), 608 * kKiB);             // 32 KiB steps
  EXPECT_EQ(on.capacityFor(1 * kMiB), 1 * kMiB);                 // the default chunk
  EXPECT_EQ(on.capacityFor(1 * kMiB + 1), 1 * kMiB + 4 * kKiB);  // above the max: pages
  for (size_t size = 1; size <= 1 * kMiB; size += 997) {
    const size_t pages = (size + 4095) / 4096 * 4096;
    const size_t cap = on.capacityFor(size);
    ASSERT_GE(cap, pages) << size;
    ASSERT_LE(cap - pages, pages / 16) << size;
    ASSERT_EQ(cap % ChunkBufferPool::kPageBytes, 0u) << size;
  }
}

// Pass: a given block of a class comes back from the next take of that class
// (the same memory), and a take of another class finds nothing.
TEST(ChunkBufferPool, ReusesAFreedBlockOfItsClass) {
  ChunkBufferPool pool(8 * kMiB);
  const size_t cap = pool.capacityFor(110 * 1000);
  char* b = fresh(cap);
  pool.give(b, cap);
  EXPECT_EQ(pool.stats().idleBytes, cap);
  EXPECT_EQ(take(pool, pool.capacityFor(300 * kKiB)), nullptr);
  char* again = take(pool, cap);
  EXPECT_EQ(again, b);
  EXPECT_EQ(pool.stats().reused, 1u);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  EXPECT_EQ(take(pool, cap), nullptr);  // taken once only
  std::free(again);
}

// Pass: a take whose class is empty takes a block of one of the next two
// classes (its size reported), never a smaller one nor one further up.
TEST(ChunkBufferPool, TakesFromTheNextTwoClasses) {
  ChunkBufferPool pool(8 * kMiB);
  pool.give(fresh(112 * kKiB), 112 * kKiB);
  size_t taken = 0;
  EXPECT_EQ(pool.take(100 * kKiB, &taken), nullptr);  // 112 KiB is 3 classes up
  EXPECT_EQ(taken, 0u);
  char* b = pool.take(104 * kKiB, &taken);  // 2 classes up
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(taken, 112 * kKiB);
  pool.give(b, taken);
  EXPECT_EQ(pool.take(116 * kKiB, &taken), nullptr);  // only a smaller one idle
  EXPECT_EQ(pool.stats().idleBytes, 112 * kKiB);
}

// Pass: the idle bytes never pass the limit; gives beyond it are freed.
TEST(ChunkBufferPool, BoundRespected) {
  ChunkBufferPool pool(1 * kMiB);
  const size_t cap = pool.capacityFor(200 * kKiB);
  for (int i = 0; i < 20; ++i) {
    pool.give(fresh(cap), cap);
    ASSERT_LE(pool.stats().idleBytes, 1 * kMiB);
  }
  const ChunkBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.kept, 1 * kMiB / cap);
  EXPECT_EQ(s.kept + s.freed, 20u);
  EXPECT_EQ(s.idleBuffers, s.kept);
}

// Pass: drain frees every idle block; setIdleLimit frees down to the new limit
// and 0 turns the pool off (takes find nothing, gives are freed).
TEST(ChunkBufferPool, DrainAndLimitFree) {
  ChunkBufferPool pool(4 * kMiB);
  const size_t cap = pool.capacityFor(128 * kKiB);
  for (int i = 0; i < 16; ++i) pool.give(fresh(cap), cap);
  EXPECT_EQ(pool.stats().idleBytes, 16 * cap);
  pool.setIdleLimit(1 * kMiB);
  EXPECT_LE(pool.stats().idleBytes, 1 * kMiB);
  EXPECT_EQ(pool.drain(), 1 * kMiB);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  EXPECT_EQ(pool.stats().idleBuffers, 0u);

  pool.give(fresh(cap), cap);
  pool.setIdleLimit(0);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  pool.give(fresh(cap), cap);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
  EXPECT_EQ(take(pool, cap), nullptr);
}

// Pass: sizes that do not fit bypass the pool: below 64 KiB, above the maximum
// buffer, or a capacity that is not a class size.
TEST(ChunkBufferPool, SizesThatDoNotFitBypass) {
  ChunkBufferPool pool(8 * kMiB, 1 * kMiB);
  pool.give(fresh(32 * kKiB), 32 * kKiB);
  pool.give(fresh(2 * kMiB), 2 * kMiB);
  pool.give(fresh(132 * kKiB), 132 * kKiB);  // classes above 128 KiB are 8 KiB apart
  const ChunkBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.idleBytes, 0u);
  EXPECT_EQ(s.freed, 3u);
  EXPECT_EQ(take(pool, 32 * kKiB), nullptr);
  EXPECT_EQ(take(pool, 2 * kMiB), nullptr);
  EXPECT_EQ(pool.stats().missed, 0u);  // not poolable: not even a miss

  // A smaller maximum frees the classes above it.
  pool.give(fresh(1 * kMiB), 1 * kMiB);
  EXPECT_EQ(pool.stats().idleBytes, 1 * kMiB);
  pool.setLimits(8 * kMiB, 512 * kKiB);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
}

// Pass: releaseUnused frees what sat idle for the whole period and keeps what
// was taken and given back in it (a steady epoch), so an idle pool empties.
TEST(ChunkBufferPool, ReleaseUnusedFreesOnlyIdleBytes) {
  ChunkBufferPool pool(8 * kMiB);
  const size_t cap = pool.capacityFor(100 * kKiB);
  for (int i = 0; i < 8; ++i) pool.give(fresh(cap), cap);
  pool.releaseUnused();  // starts a period; nothing measured yet
  EXPECT_EQ(pool.stats().idleBytes, 8 * cap);
  // This period 3 are taken and given back: 5 stayed idle throughout.
  std::vector<char*> held;
  for (int i = 0; i < 3; ++i) held.push_back(take(pool, cap));
  for (char* b : held) pool.give(b, cap);
  EXPECT_EQ(pool.releaseUnused(), 5 * cap);
  EXPECT_EQ(pool.stats().idleBytes, 3 * cap);
  // Nothing taken in the next period: all of it goes.
  EXPECT_EQ(pool.releaseUnused(), 3 * cap);
  EXPECT_EQ(pool.stats().idleBytes, 0u);
}

// Pass: ChunkBuffer::pageAligned takes from the global pool and its last owner
// gives the memory back; a reused buffer is page-aligned with a class capacity.
TEST(ChunkBufferPool, ChunkBuffersRecycleThroughTheGlobalPool) {
  ChunkBufferPool& pool = ChunkBufferPool::global();
  pool.setLimits(4 * kMiB, 1 * kMiB);
  const char* first = nullptr;
  {
    ChunkBuffer b = ChunkBuffer::pageAligned(110 * 1000);
    first = b.data();
    EXPECT_EQ(b.capacity(), pool.capacityFor(110 * 1000));
    std::memset(b.data(), 0x5a, b.size());
  }
  EXPECT_EQ(pool.stats().idleBuffers, 1u);
  ChunkBuffer again = ChunkBuffer::pageAligned(108 * kKiB);  // same class
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.size(), 108 * kKiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again.data()) % ChunkBuffer::kPageBytes, 0u);
  ChunkBuffer plain(110 * 1000);  // not page-aligned: never pooled
  plain = ChunkBuffer();
  EXPECT_EQ(pool.stats().idleBuffers, 0u);
  again = ChunkBuffer();
  EXPECT_EQ(pool.stats().idleBuffers, 1u);
  pool.setLimits(0, ChunkBufferPool::kDefaultMaxBufferBytes);  // off again, drained
  EXPECT_EQ(pool.stats().idleBytes, 0u);
}

// Pass: many threads taking and giving blocks of several classes at once
// leave the pool consistent (idle bytes within the bound and equal to the sum
// of its blocks), and no block is handed to two owners (each is stamped).
TEST(ChunkBufferPool, ThreadSafetySmoke) {
  ChunkBufferPool pool(2 * kMiB);
  constexpr int kThreads = 8, kRounds = 4000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<char*, size_t>> mine;
      for (int i = 0; i < kRounds; ++i) {
        const size_t cap = pool.capacityFor((64 + rng() % 200) * kKiB);
        if (rng() % 2 == 0 || mine.empty()) {
          size_t taken = 0;
          char* b = pool.take(cap, &taken);
          if (b == nullptr) b = fresh(taken = cap);
          std::memset(b, t, 64);  // stamp: a second owner would overwrite it
          mine.emplace_back(b, taken);
        } else {
          auto [b, c] = mine.back();
          mine.pop_back();
          for (int k = 0; k < 64; ++k) ASSERT_EQ(b[k], static_cast<char>(t));
          pool.give(b, c);
        }
        if (i % 500 == 0) pool.releaseUnused();
      }
      for (auto [b, c] : mine) pool.give(b, c);
    });
  }
  for (auto& th : threads) th.join();
  const ChunkBufferPool::Stats s = pool.stats();
  EXPECT_LE(s.idleBytes, 2 * kMiB);
  EXPECT_GT(s.reused, 0u);
  EXPECT_EQ(pool.drain(), s.idleBytes);
}

}  // namespace
}  // namespace epochfs::cache
