// cache/chunk_buffer: uninitialised, move-only chunk bytes; page-aligned on request.
#include "cache/chunk_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace epochfs::cache {
namespace {

// Pass: pageAligned gives a page-aligned buffer of the asked size whose
// capacity is rounded up to whole pages (room for an O_DIRECT read), and every
// byte of the capacity is writable.
TEST(ChunkBuffer, PageAlignedHasWholePagesOfRoom) {
  for (size_t size : {size_t{1}, size_t{4096}, size_t{65537}, size_t{1} << 20}) {
    ChunkBuffer b = ChunkBuffer::pageAligned(size);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % ChunkBuffer::kPageBytes, 0u) << size;
    EXPECT_EQ(b.size(), size);
    EXPECT_EQ(b.capacity() % ChunkBuffer::kPageBytes, 0u);
    EXPECT_GE(b.capacity(), size);
    EXPECT_LT(b.capacity() - size, ChunkBuffer::kPageBytes);
    std::memset(b.data(), 0x5a, b.capacity());
  }
}

// Pass: shrinking keeps the same memory and bytes; growing past the capacity
// keeps the first size() bytes; a moved-from buffer is empty.
TEST(ChunkBuffer, ResizeKeepsBytesAndMoveEmpties) {
  std::vector<char> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  ChunkBuffer b = ChunkBuffer::copyOf(bytes);
  EXPECT_TRUE(b == bytes);
  const char* mem = b.data();
  b.resize(5000);
  EXPECT_EQ(b.data(), mem);
  EXPECT_TRUE(b == std::vector<char>(bytes.begin(), bytes.begin() + 5000));
  b.resize(20000);
  EXPECT_EQ(b.size(), 20000u);
  EXPECT_EQ(std::memcmp(b.data(), bytes.data(), 5000), 0);
  ChunkBuffer moved = std::move(b);
  EXPECT_EQ(moved.size(), 20000u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_FALSE(moved == bytes);  // different length
}

}  // namespace
}  // namespace epochfs::cache
