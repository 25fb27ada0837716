// cache/huge_page_slabs: fresh chunk-buffer memory carved from 2 MiB slabs,
// given back to the kernel piece by piece and unmapped slab by slab.
#include "cache/huge_page_slabs.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cache/chunk_buffer.h"
#include "cache/chunk_buffer_pool.h"

namespace epochfs::cache {
namespace {

constexpr size_t kKiB = 1024;
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

// Pass: off by default; bad sizes are refused (the caller falls back).
TEST(HugePageSlabs, OffAndBadSizesCarveNothing) {
  HugePageSlabs slabs;
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

// Pass: pieces are page-aligned, do not overlap, sit in 2 MiB-aligned slabs
// one after another, and a piece that does not fit opens the next slab.
TEST(HugePageSlabs, CarvesAlignedPiecesOneAfterAnother) {
  HugePageSlabs slabs;
  slabs.enable(true);
  const size_t piece = 112 * kKiB;
  std::vector<char*> pieces;
  for (size_t i = 0; i < 40; ++i) {
    char* p = slabs.carve(piece);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
    std::memset(p, static_cast<int>(i), piece);
    pieces.push_back(p);
  }
  const size_t perSlab = kSlab / piece;  // 18
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(pieces[i]) & ~uintptr_t{kSlab - 1};
    const uintptr_t first = reinterpret_cast<uintptr_t>(pieces[i - i % perSlab]);
    EXPECT_EQ(base, first) << i;  // every slab starts on a 2 MiB boundary
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pieces[i]) - base, (i % perSlab) * piece) << i;
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i][0], static_cast<char>(i));
    EXPECT_EQ(pieces[i][piece - 1], static_cast<char>(i));
  }
  EXPECT_EQ(slabs.stats().slabsMapped, 3u);
  EXPECT_EQ(slabs.stats().liveBytes, 40 * piece);
  for (char* p : pieces) EXPECT_TRUE(slabs.release(p));
  EXPECT_EQ(slabs.stats().liveBytes, 0u);
}

// Pass: a released piece's pages leave the process at once; a slab whose
// pieces are all released is unmapped, except the one still being carved.
TEST(HugePageSlabs, ReleaseReturnsPagesAndUnmapsEmptySlabs) {
  HugePageSlabs slabs;
  slabs.enable(true);
  const size_t piece = 512 * kKiB;
  char* a = slabs.carve(piece);
  char* b = slabs.carve(piece);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::memset(a, 1, piece);
  std::memset(b, 2, piece);
  EXPECT_EQ(residentPages(a, piece), piece / 4096);
  EXPECT_TRUE(slabs.release(a));
  EXPECT_EQ(residentPages(a, piece), 0u);  // given back, slab still mapped
  EXPECT_TRUE(mapped(a, piece));
  EXPECT_EQ(b[0], 2);
  EXPECT_EQ(b[piece - 1], 2);
  // Fill the first slab and open a second one.
  char* c = slabs.carve(piece);
  char* d = slabs.carve(piece);
  char* e = slabs.carve(piece);  // does not fit: second slab
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(slabs.stats().slabsMapped, 2u);
  EXPECT_TRUE(slabs.release(b));
  EXPECT_TRUE(slabs.release(c));
  EXPECT_TRUE(mapped(a, kSlab));
  EXPECT_TRUE(slabs.release(d));  // the first slab's last piece: unmapped
  EXPECT_FALSE(mapped(a, kSlab));
  EXPECT_EQ(slabs.stats().slabsUnmapped, 1u);
  EXPECT_EQ(slabs.stats().slabBytes, kSlab);
  EXPECT_TRUE(slabs.release(e));  // the current slab stays for the next carve
  EXPECT_TRUE(mapped(e, piece));
  EXPECT_FALSE(slabs.release(e));  // twice: not ours any more
}

// Pass: threads carving, writing, checking and releasing at once never get
// overlapping pieces (each piece keeps its owner's pattern) and end with
// nothing live.
TEST(HugePageSlabs, ConcurrentCarveAndRelease) {
  HugePageSlabs slabs;
  slabs.enable(true);
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
          auto [q, n] = held[rng() % held.size()];
          for (size_t k = 0; k < n; k += 4096) bad += q[k] != static_cast<char>(t);
          slabs.release(q);
          std::erase_if(held, [q = q](const auto& h) { return h.first == q; });
        }
      }
      for (auto [q, n] : held) slabs.release(q);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(slabs.stats().liveBytes, 0u);
  EXPECT_EQ(slabs.stats().carved, slabs.stats().released);
  EXPECT_LE(slabs.stats().slabBytes, kSlab);  // only the current slab left
}

// Pass: with the pool's slabs on, page-aligned chunk buffers are carved, go
// back to the pool when freed, and leave it to their slab (not to malloc).
TEST(HugePageSlabs, ChunkBuffersComeFromTheGlobalPoolsSlabs) {
  ChunkBufferPool& pool = ChunkBufferPool::global();
  pool.setLimits(4 << 20, 1 << 20);
  pool.enableHugePageSlabs(true);
  const auto before = pool.slabStats();
  {
    ChunkBuffer b = ChunkBuffer::pageAligned(110 * 1000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
    EXPECT_EQ(pool.slabStats().carved, before.carved + 1);
  }
  EXPECT_EQ(pool.stats().idleBuffers, 1u);  // kept idle, not released
  pool.drain();
  EXPECT_EQ(pool.slabStats().released, before.released + 1);
  pool.enableHugePageSlabs(false);
  pool.setLimits(0, 1 << 20);
}

}  // namespace
}  // namespace epochfs::cache
