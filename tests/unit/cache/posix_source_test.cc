// cache/posix_source: readChunk returns exactly the file's bytes at every
// chunk of every size (O_DIRECT straight into the chunk for 64 KiB and more,
// the bounce buffer below), and refuses another version of the file.
#include "cache/posix_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/chunk_buffer_pool.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::cache {
namespace {

class PosixSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = PosixSource::open(dir_);
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    source_ = std::move(s).value();
  }

  std::vector<char> write(const std::string& name, size_t size) {
    std::vector<char> bytes(size);
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + size) % 251);
    std::ofstream(std::filesystem::path(dir_) / name, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(size));
    return bytes;
  }
  FileIdentity identity(const std::string& name) {
    auto st = source_->lstat(name);
    EXPECT_TRUE(st.isOk());
    return identityOf(name, *st);
  }

  // /var/tmp: a disk filesystem (O_DIRECT) where /tmp may be tmpfs.
  ::epochfs::testing::ScopedTempDir tmp_{"posix-source-test", "/var/tmp"};
  const std::string dir_ = tmp_.path();
  std::unique_ptr<PosixSource> source_;
};

// Pass: for files below, at and above the 64 KiB direct threshold and the
// chunk size (odd tails included), every chunk read has the file's bytes and
// the expected length; chunks of 64 KiB and more are page-aligned buffers.
TEST_F(PosixSourceTest, ReadChunkReturnsTheFilesBytesAtEverySize) {
  constexpr size_t kChunk = 1 << 20;
  for (size_t size : {size_t{1000}, size_t{65535}, size_t{65536}, size_t{300001}, kChunk,
                      kChunk + 5, 2 * kChunk + 70000}) {
    const std::string name = std::to_string(size) + ".f";
    const std::vector<char> bytes = write(name, size);
    const FileIdentity id = identity(name);
    for (uint64_t off = 0; off < size; off += kChunk) {
      const size_t len = std::min<uint64_t>(kChunk, size - off);
      auto r = source_->readChunk(name, id, off, len);
      ASSERT_TRUE(r.isOk()) << name << "@" << off << ": " << r.status().toString();
      ASSERT_EQ(r->size(), len) << name << "@" << off;
      EXPECT_TRUE(*r == std::vector<char>(bytes.begin() + static_cast<long>(off),
                                          bytes.begin() + static_cast<long>(off + len)))
          << name << "@" << off;
      if (len >= 65536) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(r->data()) % 4096, 0u) << name;
      }
    }
  }
}

// Pass: with the chunk-buffer pool on, a chunk read into a recycled buffer
// (filled with 0xEE by its previous owner) holds the file's bytes and nothing
// else: every byte up to size() is overwritten, at every size class.
TEST_F(PosixSourceTest, ReadChunkIntoARecycledBufferShowsNoOldBytes) {
  ChunkBufferPool& pool = ChunkBufferPool::global();
  pool.setLimits(16 << 20, 1 << 20);
  for (size_t size :
       {size_t{65536}, size_t{110000}, size_t{133000}, size_t{300001}, size_t{1} << 20}) {
    const std::string name = std::to_string(size) + ".r";
    const std::vector<char> bytes = write(name, size);
    {
      ChunkBuffer old = ChunkBuffer::pageAligned(size);
      std::memset(old.data(), 0xEE, old.capacity());
    }  // back to the pool
    const uint64_t reusedBefore = pool.stats().reused;
    auto r = source_->readChunk(name, identity(name), 0, size);
    ASSERT_TRUE(r.isOk()) << name << ": " << r.status().toString();
    EXPECT_EQ(pool.stats().reused, reusedBefore + 1) << name;
    ASSERT_EQ(r->size(), size);
    EXPECT_TRUE(*r == bytes) << name;
  }
  pool.setLimits(0, ChunkBufferPool::kDefaultMaxBufferBytes);
}

// Pass: a file changed since its identity was taken gives kStale, never the
// new bytes, on both the direct and the bounce path.
TEST_F(PosixSourceTest, ReadChunkRefusesAChangedFile) {
  for (size_t size : {size_t{5000}, size_t{200000}}) {
    const std::string name = std::to_string(size) + ".g";
    write(name, size);
    const FileIdentity id = identity(name);
    write(name, size + 4096);  // rewritten: size, mtime and ctime move
    auto r = source_->readChunk(name, id, 0, size);
    ASSERT_FALSE(r.isOk()) << size;
    EXPECT_EQ(r.status().code(), Status::Code::kStale) << size;
  }
}

}  // namespace
}  // namespace epochfs::cache
