#include "transport/receive_buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "cache/chunk_buffer_pool.h"

namespace epochfs::transport {
namespace {

constexpr size_t kMiB = 1 << 20;

// Pass: a released buffer comes back from the next acquire of the same length
// (same memory, old bytes kept: no zero-fill), and counts as reused.
TEST(ReceiveBufferPool, ReusesReleasedBufferWithoutZeroFill) {
  auto pool = ReceiveBufferPool::create(4 * kMiB);
  cache::ChunkBuffer a = pool->acquire(kMiB);
  ASSERT_EQ(a.size(), kMiB);
  EXPECT_EQ(pool->allocated(), 1u);
  std::memset(a.data(), 0x5a, a.size());
  const char* mem = a.data();
  pool->release(std::move(a));
  EXPECT_EQ(pool->idleBuffers(), 1u);
  EXPECT_EQ(pool->idleBytes(), kMiB);
  cache::ChunkBuffer b = pool->acquire(kMiB);
  EXPECT_EQ(b.data(), mem);
  EXPECT_EQ(b.size(), kMiB);
  EXPECT_EQ(b[kMiB - 1], 0x5a);
  EXPECT_EQ(pool->reused(), 1u);
  EXPECT_EQ(pool->idleBuffers(), 0u);
  EXPECT_EQ(pool->idleBytes(), 0u);
}

// Pass: idle bytes never exceed the bound; releases beyond it are freed.
TEST(ReceiveBufferPool, IdleBytesStayWithinTheBound) {
  auto pool = ReceiveBufferPool::create(3 * kMiB);
  std::vector<cache::ChunkBuffer> held;
  for (int i = 0; i < 5; ++i) held.push_back(pool->acquire(kMiB));
  for (auto& b : held) {
    pool->release(std::move(b));
    EXPECT_LE(pool->idleBytes(), 3 * kMiB);
  }
  EXPECT_EQ(pool->idleBuffers(), 3u);
  // A bound of zero keeps nothing.
  auto none = ReceiveBufferPool::create(0);
  none->release(none->acquire(kMiB));
  EXPECT_EQ(none->idleBuffers(), 0u);
}

// Pass: small buffers are not pooled, and a buffer much larger than asked is
// not handed out for a short reply (it would pin memory); one within 1/16 is,
// resized to the exact length.
TEST(ReceiveBufferPool, OnlyCloseSizesAreReused) {
  auto pool = ReceiveBufferPool::create(8 * kMiB);
  pool->release(cache::ChunkBuffer(4096));
  EXPECT_EQ(pool->idleBuffers(), 0u);
  pool->release(cache::ChunkBuffer(kMiB));
  cache::ChunkBuffer half = pool->acquire(kMiB / 2);
  EXPECT_EQ(half.size(), kMiB / 2);
  EXPECT_EQ(pool->reused(), 0u);
  EXPECT_EQ(pool->idleBuffers(), 1u);
  cache::ChunkBuffer close = pool->acquire(kMiB - 4096);
  EXPECT_EQ(close.size(), kMiB - 4096);
  EXPECT_EQ(pool->reused(), 1u);
}

// Pass: the last reference to an adopted chunk returns its buffer to the pool
// (no leak, no double free), and a chunk that outlives its pool frees its data.
TEST(ReceiveBufferPool, AdoptedChunkReturnsItsBuffer) {
  auto pool = ReceiveBufferPool::create(4 * kMiB);
  auto c = std::make_unique<cache::Chunk>();
  c->data = pool->acquire(kMiB);
  const char* mem = c->data.data();
  cache::ChunkRef ref = pool->adopt(std::move(c));
  cache::ChunkRef copy = ref;
  ref.reset();
  EXPECT_EQ(pool->idleBuffers(), 0u);  // still referenced
  copy.reset();
  ASSERT_EQ(pool->idleBuffers(), 1u);
  EXPECT_EQ(pool->acquire(kMiB).data(), mem);

  auto c2 = std::make_unique<cache::Chunk>();
  c2->data = pool->acquire(kMiB);
  cache::ChunkRef orphan = pool->adopt(std::move(c2));
  pool.reset();    // the pool goes first
  orphan.reset();  // frees normally (ASan/LSan would flag a leak or a use after free)
}

// Pass: a buffer the pool does not hold comes from the daemon's chunk-buffer
// pool (page-aligned; an evicted chunk's buffer, already faulted in, is handed
// out again), and one freed outside the receive pool's bound goes back there.
TEST(ReceiveBufferPool, FreshBuffersComeFromTheChunkBufferPool) {
  cache::ChunkBufferPool& global = cache::ChunkBufferPool::global();
  global.setLimits(8 * kMiB, kMiB);
  {
    cache::ChunkBuffer evicted = cache::ChunkBuffer::pageAligned(300 * 1024);
    const char* mem = evicted.data();
    evicted = cache::ChunkBuffer();  // freed: kept idle by the chunk-buffer pool
    auto pool = ReceiveBufferPool::create(0);
    cache::ChunkBuffer b = pool->acquire(300 * 1024);
    EXPECT_EQ(b.data(), mem);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % cache::ChunkBufferPool::kPageBytes, 0u);
    EXPECT_EQ(b.size(), 300u * 1024);
    pool->release(std::move(b));  // beyond the bound (0): back to the chunk-buffer pool
    EXPECT_EQ(pool->idleBuffers(), 0u);
    EXPECT_EQ(cache::ChunkBuffer::pageAligned(300 * 1024).data(), mem);
  }
  global.setLimits(0, kMiB);
}

}  // namespace
}  // namespace epochfs::transport
