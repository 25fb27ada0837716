// cache/huge_page_slabs: chunk-buffer memory carved from 2 MiB slabs, reused
// in place when released, holes within their bound, empty slabs unmapped.
#include "cache/huge_page_slabs.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cache/chunk_buffer.h"
#include "cache/chunk_buffer_pool.h"

namespace epochfs::cache {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr size_t kSlab = HugePageSlabs::kSlabBytes;

bool mapped(const void* p, size_t len) {
  std::vector<unsigned char> v((len + 4095) / 4096);
  return mincore(const_cast<void*>(p), len, v.data()) == 0;
}

size_t residentPages(const void* p, size_t len) {
  std::vector<unsigned char> v((len + 4095) / 4096);
  if (mincore(const_cast<void*>(p), len, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

uintptr_t slabOf(const char* p) { return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{kSlab - 1}; }

void expectConsistent(const HugePageSlabs& slabs) {
  const auto s = slabs.stats();
  EXPECT_EQ(s.slabBytes, s.liveBytes + s.holeBytes);
  EXPECT_EQ(s.slabBytes, (s.slabsMapped - s.slabsUnmapped) * kSlab);
}

// Pass: off by default; bad sizes are refused (the caller falls back).
TEST(HugePageSlabs, OffAndBadSizesCarveNothing) {
  HugePageSlabs slabs;
  slabs.setHoleLimit(4 * kMiB);
  EXPECT_EQ(slabs.carve(64 * kKiB), nullptr);
  slabs.enable(true);
  EXPECT_EQ(slabs.carve(0), nullptr);
  EXPECT_EQ(slabs.carve(64 * kKiB + 1), nullptr);
  EXPECT_EQ(slabs.carve(HugePageSlabs::kMaxPieceBytes + 4096), nullptr);
  EXPECT_EQ(slabs.stats().slabsMapped, 0u);
  char other[16];
  EXPECT_FALSE(slabs.release(other));
  EXPECT_FALSE(slabs.release(nullptr));
}

// Pass: pieces are page-aligned, do not overlap, fill 2 MiB-aligned slabs
// from the front, and a piece that does not fit opens the next slab.
TEST(HugePageSlabs, CarvesAlignedPiecesOneAfterAnother) {
  HugePageSlabs slabs;
  slabs.setHoleLimit(4 * kMiB);
  slabs.enable(true);
  const size_t piece = 112 * kKiB;
  std::vector<char*> pieces;
  for (size_t i = 0; i < 40; ++i) {
    char* p = slabs.carve(piece);
    ASSERT_NE(p, nullptr);
    std::memset(p, static_cast<int>(i), piece);
    pieces.push_back(p);
  }
  const size_t perSlab = kSlab / piece;  // 18
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(slabOf(pieces[i]), slabOf(pieces[i - i % perSlab])) << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pieces[i]) - slabOf(pieces[i]), (i % perSlab) * piece)
        << i;
    EXPECT_EQ(pieces[i][0], static_cast<char>(i));
    EXPECT_EQ(pieces[i][piece - 1], static_cast<char>(i));
  }
  EXPECT_EQ(slabs.stats().slabsMapped, 3u);
  EXPECT_EQ(slabs.stats().liveBytes, 40 * piece);
  expectConsistent(slabs);
  for (char* p : pieces) EXPECT_TRUE(slabs.release(p));
  EXPECT_EQ(slabs.stats().liveBytes, 0u);
  EXPECT_FALSE(slabs.release(pieces[0]));  // twice: not ours any more
  expectConsistent(slabs);
}

// Pass: a released piece is a hole the next carve of its size takes (the same
// memory, still resident: no new slab, no fault); neighbouring holes merge
// into one that a larger piece fits.
TEST(HugePageSlabs, HolesAreReusedAndMerge) {
  HugePageSlabs slabs;
  slabs.setHoleLimit(4 * kMiB);
  slabs.enable(true);
  std::vector<char*> p;
  for (int i = 0; i < 8; ++i) p.push_back(slabs.carve(256 * kKiB));  // one full slab
  for (char* q : p) ASSERT_NE(q, nullptr);
  for (char* q : p) std::memset(q, 7, 256 * kKiB);
  EXPECT_EQ(slabs.stats().holeBytes, 0u);
  EXPECT_TRUE(slabs.release(p[3]));
  EXPECT_EQ(slabs.carve(256 * kKiB), p[3]);
  EXPECT_EQ(residentPages(p[3], 256 * kKiB), 256 * kKiB / 4096);
  EXPECT_TRUE(slabs.release(p[3]));
  EXPECT_TRUE(slabs.release(p[5]));
  EXPECT_TRUE(slabs.release(p[4]));  // joins 3 and 5: one 768 KiB hole
  EXPECT_EQ(slabs.carve(768 * kKiB), p[3]);
  EXPECT_EQ(slabs.stats().slabsMapped, 1u);
  // A smaller request takes the smallest hole that fits, not the first.
  EXPECT_TRUE(slabs.release(p[0]));  // 256 KiB hole at the front
  EXPECT_TRUE(slabs.release(p[7]));
  EXPECT_TRUE(slabs.release(p[6]));  // 512 KiB hole at the back
  EXPECT_EQ(slabs.carve(400 * kKiB), p[6]);
  EXPECT_EQ(slabs.carve(200 * kKiB), p[0]);
  expectConsistent(slabs);
}

// Pass: a new slab is mapped only while the holes are within the bound; past
// it a carve that no hole fits is refused (the caller mallocs), and an empty
// slab past the bound is unmapped at once, within it kept until
// releaseEmpty().
TEST(HugePageSlabs, HolesStayWithinTheirBound) {
  HugePageSlabs slabs;
  slabs.enable(true);
  slabs.setHoleLimit(kMiB);
  const size_t q = kSlab / 4;
  std::vector<char*> p;
  for (int i = 0; i < 8; ++i) p.push_back(slabs.carve(q));  // two full slabs
  for (char* x : p) ASSERT_NE(x, nullptr);
  EXPECT_EQ(slabs.stats().slabsMapped, 2u);
  EXPECT_EQ(slabs.stats().holeBytes, 0u);
  EXPECT_TRUE(slabs.release(p[0]));
  EXPECT_TRUE(slabs.release(p[4]));   // holes: 512 KiB in each slab = the bound
  char* big = slabs.carve(q + 4096);  // no hole fits, holes within: a third slab
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(slabOf(big), reinterpret_cast<uintptr_t>(big));
  EXPECT_EQ(slabs.stats().slabsMapped, 3u);
  EXPECT_NE(slabs.carve(kMiB), nullptr);  // from the third slab's hole
  // Holes now 512 + 512 + 508 KiB > the bound: no more slabs.
  EXPECT_EQ(slabs.carve(q + 4096), nullptr);
  EXPECT_EQ(slabs.stats().refused, 1u);
  char* again = slabs.carve(q);  // but a hole that fits still serves
  EXPECT_TRUE(again == p[0] || again == p[4]);
  EXPECT_EQ(slabs.stats().slabsMapped, 3u);
  expectConsistent(slabs);

  HugePageSlabs kept;
  kept.enable(true);
  kept.setHoleLimit(4 * kMiB);
  char* x = kept.carve(64 * kKiB);
  std::memset(x, 1, 64 * kKiB);
  EXPECT_TRUE(kept.release(x));  // empty, within the bound: kept
  EXPECT_TRUE(mapped(x, kSlab));
  EXPECT_EQ(kept.releaseEmpty(), kSlab);
  EXPECT_FALSE(mapped(x, kSlab));

  HugePageSlabs tight;
  tight.enable(true);
  tight.setHoleLimit(64 * kKiB);
  char* y = tight.carve(64 * kKiB);
  EXPECT_TRUE(tight.release(y));  // empty, past the bound: unmapped now
  EXPECT_FALSE(mapped(y, kSlab));
  EXPECT_EQ(tight.stats().slabBytes, 0u);
  EXPECT_FALSE(tight.release(y));  // no slab mapped: not a piece (and no lock taken)
  expectConsistent(tight);
  char* fresh = tight.carve(64 * kKiB);  // a new slab after the last one went
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(tight.release(fresh));
}

// Pass: a bound of 0 (memory pressure) unmaps empty slabs and drops the
// pages of the partial holes; live pieces keep their bytes.
TEST(HugePageSlabs, ZeroBoundDropsHolePages) {
  HugePageSlabs slabs;
  slabs.enable(true);
  slabs.setHoleLimit(8 * kMiB);
  char* a = slabs.carve(512 * kKiB);
  char* b = slabs.carve(512 * kKiB);
  char* other = nullptr;
  // The first fills slab 1's back half, two fill slab 2, the last opens slab 3.
  for (int i = 0; i < 4; ++i) other = slabs.carve(kSlab / 2);
  std::memset(a, 1, 512 * kKiB);
  std::memset(b, 2, 512 * kKiB);
  EXPECT_TRUE(slabs.release(a));
  EXPECT_TRUE(slabs.release(other));  // slab 3 empty, within the bound: kept
  EXPECT_EQ(slabs.stats().slabsMapped, 3u);
  EXPECT_EQ(slabs.stats().slabsUnmapped, 0u);
  slabs.setHoleLimit(0);
  EXPECT_EQ(residentPages(a, 512 * kKiB), 0u);
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(b[512 * kKiB - 1], 2);
  EXPECT_EQ(slabs.stats().slabsUnmapped, 1u);  // slab 3; slab 1 still holds b
  EXPECT_FALSE(mapped(other, kSlab));
  expectConsistent(slabs);
}

// Pass: a RAM tier's churn (log-normal ~110 KB chunks, one evicted at random
// for each admitted, 48 MiB live, the daemon's 4 MiB bound) is served from
// the slabs almost always, and the slabs never hold more than the live bytes
// plus the bound plus one slab.
TEST(HugePageSlabs, TierChurnStaysBoundedAndServed) {
  HugePageSlabs slabs;
  slabs.enable(true);
  const size_t bound = 4 * kMiB;
  slabs.setHoleLimit(bound);
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> sizes(std::log(110e3), 0.6);
  auto pageSize = [&] {
    const size_t b = std::clamp<size_t>(static_cast<size_t>(sizes(rng)), 64 * kKiB, kMiB);
    return (b + 4095) / 4096 * 4096;
  };
  std::vector<std::pair<char*, size_t>> live;
  size_t liveBytes = 0, carves = 0, refused = 0, maxSlab = 0, maxLive = 0;
  for (int i = 0; i < 40000; ++i) {
    while (liveBytes > 48 * kMiB) {
      const size_t k = rng() % live.size();
      if (!slabs.release(live[k].first)) std::free(live[k].first);
      liveBytes -= live[k].second;
      live[k] = live.back();
      live.pop_back();
    }
    const size_t n = pageSize();
    char* p = slabs.carve(n);
    ++carves;
    if (p == nullptr) {
      ++refused;
      p = static_cast<char*>(std::aligned_alloc(4096, n));
    }
    live.emplace_back(p, n);
    liveBytes += n;
    maxLive = std::max(maxLive, liveBytes);
    maxSlab = std::max(maxSlab, slabs.stats().slabBytes);
  }
  EXPECT_LE(maxSlab, maxLive + bound + kSlab);
  EXPECT_LT(refused, carves / 20) << refused << " of " << carves;
  expectConsistent(slabs);
  for (auto [p, n] : live) {
    if (!slabs.release(p)) std::free(p);
  }
}

// Pass: threads carving, writing, checking and releasing at once never get
// overlapping pieces (each keeps its owner's pattern) and end with nothing live.
TEST(HugePageSlabs, ConcurrentCarveAndRelease) {
  HugePageSlabs slabs;
  slabs.enable(true);
  slabs.setHoleLimit(64 * kMiB);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<char*, size_t>> held;
      for (int i = 0; i < 400; ++i) {
        const size_t len = (16 + rng() % 48) * 4096;
        char* p = slabs.carve(len);
        if (p == nullptr) {
          ++bad;
          continue;
        }
        std::memset(p, t, len);
        held.emplace_back(p, len);
        if (held.size() > 6) {
          const size_t k = rng() % held.size();
          auto [q, n] = held[k];
          for (size_t off = 0; off < n; off += 4096) bad += q[off] != static_cast<char>(t);
          EXPECT_TRUE(slabs.release(q));
          held[k] = held.back();
          held.pop_back();
        }
      }
      for (auto [q, n] : held) slabs.release(q);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(slabs.stats().liveBytes, 0u);
  EXPECT_EQ(slabs.stats().carved, slabs.stats().released);
  expectConsistent(slabs);
}

// Pass: with the global pool's slabs on, a page-aligned chunk buffer is
// carved and, freed, goes back to its slab (not into the idle lists), and the
// next buffer of its size reuses that memory.
TEST(HugePageSlabs, ChunkBuffersComeFromTheGlobalPoolsSlabs) {
  ChunkBufferPool& pool = ChunkBufferPool::global();
  pool.setLimits(4 * kMiB, kMiB);
  pool.enableHugePageSlabs(true);
  const auto before = pool.slabStats();
  const char* first = nullptr;
  {
    ChunkBuffer b = ChunkBuffer::pageAligned(110 * 1000);
    first = b.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 4096, 0u);
    EXPECT_EQ(pool.slabStats().carved, before.carved + 1);
  }
  EXPECT_EQ(pool.stats().idleBuffers, 0u);
  EXPECT_EQ(pool.slabStats().released, before.released + 1);
  {
    ChunkBuffer again = ChunkBuffer::pageAligned(110 * 1000);
    EXPECT_EQ(again.data(), first);
  }
  pool.enableHugePageSlabs(false);
  pool.setLimits(0, kMiB);
  pool.drain();
  EXPECT_EQ(pool.slabStats().slabBytes, 0u);
}

}  // namespace
}  // namespace epochfs::cache
