// Unit tests for DiskTier: hits and misses, restart, corruption and torn
// tails, directory locking and ownership, file modes, foreign files, segment
// eviction and concurrent use. Every test works in its own mkdtemp directory.
#include "cache/disk_tier.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/segment_file.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::cache {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kDataset = 42;
constexpr uint64_t kHeader = SegmentFile::kHeaderBytes;
constexpr uint64_t kMiB = 1 << 20;

FileIdentity identityFor(uint64_t fileId, int64_t mtime = 100) {
  return FileIdentity{fileId, 10 * kMiB, mtime, mtime + 1, 5000 + fileId};
}

std::vector<char> dataFor(uint64_t fileId, uint32_t index, size_t bytes) {
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>((fileId * 131 + index + i) & 0xff);
  return data;
}

ChunkRef chunkOf(uint64_t fileId, uint32_t index, size_t bytes, int64_t mtime = 100) {
  return makeChunk(ChunkKey::make(kDataset, fileId, index), identityFor(fileId, mtime),
                   dataFor(fileId, index, bytes));
}

ChunkKey keyOf(uint64_t fileId, uint32_t index = 0) {
  return ChunkKey::make(kDataset, fileId, index);
}

// True if the tier returns exactly chunkOf(fileId, index, bytes).
bool hits(DiskTier& tier, uint64_t fileId, size_t bytes, uint32_t index = 0) {
  ChunkRef c = tier.lookup(keyOf(fileId, index), identityFor(fileId));
  return c != nullptr && c->data == dataFor(fileId, index, bytes) && c->verify() &&
         c->key.fileId == fileId && c->key.chunkIndex == index &&
         c->identity == identityFor(fileId);
}

void flipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char b;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b = static_cast<char>(b ^ 0x5a);
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

uint64_t segmentBytesOnDisk(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    uint32_t id;
    if (SegmentFile::parseName(e.path().filename().string(), &id)) total += e.file_size();
  }
  return total;
}

// Makes writes past `bytes` fail with EFBIG (RLIMIT_FSIZE) while alive: a
// deterministic stand-in for a full or failing disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    oldHandler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = saved_;
    r.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, oldHandler_);
  }

 private:
  struct rlimit saved_;
  void (*oldHandler_)(int);
};

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path() + "/cache"; }

  std::unique_ptr<DiskTier> open(uint64_t capacity = 64 * kMiB, uint64_t segment = 4 * kMiB,
                                 std::chrono::milliseconds probeInterval = std::chrono::hours(1)) {
    DiskTierOptions o;
    o.dir = dir_;
    o.capacityBytes = capacity;
    o.segmentBytes = segment;
    o.datasetId = kDataset;
    o.probeInterval = probeInterval;
    auto t = DiskTier::open(o);
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    return t.isOk() ? std::move(t).value() : nullptr;
  }
  std::string seg(uint32_t id) const { return dir_ + "/" + SegmentFile::nameFor(id); }

  ::epochfs::testing::ScopedTempDir tmp_{"epochfs-disk-tier"};
  std::string dir_;
};

TEST_F(DiskTierTest, HitMissAndIdentityMismatch) {
  auto tier = open();
  ASSERT_TRUE(tier);
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 5000)));
  EXPECT_TRUE(tier->contains(keyOf(1)));
  EXPECT_TRUE(hits(*tier, 1, 5000));
  EXPECT_EQ(tier->lookup(keyOf(1, 1), identityFor(1)), nullptr);
  // Another version of the file misses and drops the entry.
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1, /*mtime=*/999)), nullptr);
  EXPECT_FALSE(tier->contains(keyOf(1)));
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
  TierUsage u = tier->usage();
  EXPECT_EQ(u.chunks, 0u);
  EXPECT_EQ(u.bytesUsed, kHeader + 5000);  // dead bytes stay until the segment goes
  EXPECT_EQ(u.corruptions, 0u);
}

TEST_F(DiskTierTest, EraseAndReplace) {
  auto tier = open();
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 100, /*mtime=*/1)));
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 100)));  // same key, newer version
  EXPECT_TRUE(hits(*tier, 1, 100));
  EXPECT_EQ(tier->usage().chunks, 1u);
  tier->erase(keyOf(1));
  EXPECT_FALSE(tier->contains(keyOf(1)));
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
}

TEST_F(DiskTierTest, CreatesPrivateDirAndFiles) {
  auto tier = open();
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 100)));
  struct stat st;
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(seg(1).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/LOCK").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream lock(dir_ + "/LOCK");
  long pid = 0;
  lock >> pid;
  EXPECT_EQ(pid, ::getpid());
}

TEST_F(DiskTierTest, RestartFindsChunksWithoutReinsert) {
  uint64_t used = 0;
  {
    auto tier = open(64 * kMiB, 1 * kMiB);
    for (uint64_t f = 1; f <= 50; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 30000 + f)));
    used = tier->usage().bytesUsed;
    EXPECT_GT(tier->segmentCount(), 1u);
  }
  {
    auto tier = open(64 * kMiB, 1 * kMiB);
    ASSERT_TRUE(tier);
    TierUsage u = tier->usage();
    EXPECT_EQ(u.chunks, 50u);
    EXPECT_EQ(u.bytesUsed, used);
    for (uint64_t f = 1; f <= 50; ++f) EXPECT_TRUE(hits(*tier, f, 30000 + f)) << f;
    // Keep writing after a restart, then restart again.
    for (uint64_t f = 51; f <= 60; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 30000 + f)));
  }
  auto tier = open(64 * kMiB, 1 * kMiB);
  EXPECT_EQ(tier->usage().chunks, 60u);
  for (uint64_t f = 1; f <= 60; ++f) EXPECT_TRUE(hits(*tier, f, 30000 + f)) << f;
}

TEST_F(DiskTierTest, LaterDuplicateWinsAfterRestart) {
  {
    auto tier = open();
    ASSERT_TRUE(tier->insert(chunkOf(1, 0, 100, /*mtime=*/1)));
    ASSERT_TRUE(tier->insert(chunkOf(1, 0, 200)));
  }
  auto tier = open();
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1, 1)), nullptr);
  tier = nullptr;
  tier = open();
  EXPECT_TRUE(hits(*tier, 1, 200));
}

TEST_F(DiskTierTest, CorruptDataByteIsDetected) {
  auto tier = open();
  for (uint64_t f = 1; f <= 3; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 1000)));
  flipByte(seg(1), (kHeader + 1000) + kHeader + 500);  // record 2's data
  EXPECT_TRUE(hits(*tier, 1, 1000));
  EXPECT_EQ(tier->lookup(keyOf(2), identityFor(2)), nullptr);
  EXPECT_EQ(tier->usage().corruptions, 1u);
  EXPECT_FALSE(tier->contains(keyOf(2)));
  EXPECT_EQ(tier->lookup(keyOf(2), identityFor(2)), nullptr);
  EXPECT_EQ(tier->usage().corruptions, 1u);
  EXPECT_TRUE(hits(*tier, 3, 1000));
  // Re-admitting the chunk (as the caller does after re-reading) works.
  ASSERT_TRUE(tier->insert(chunkOf(2, 0, 1000)));
  EXPECT_TRUE(hits(*tier, 2, 1000));
}

TEST_F(DiskTierTest, CorruptHeaderByteIsDetected) {
  const uint64_t rec = kHeader + 1000;
  {
    auto tier = open();
    for (uint64_t f = 1; f <= 3; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 1000)));
    flipByte(seg(1), rec + offsetof(RecordHeader, idSize));  // record 2's header
    EXPECT_EQ(tier->lookup(keyOf(2), identityFor(2)), nullptr);
    EXPECT_EQ(tier->usage().corruptions, 1u);
    EXPECT_TRUE(hits(*tier, 3, 1000));
  }
  // On reopen the scan skips the bad header and resyncs at record 3's: only
  // record 2 is lost, and the rebuild counts it.
  auto tier = open();
  EXPECT_TRUE(hits(*tier, 1, 1000));
  EXPECT_FALSE(tier->contains(keyOf(2)));
  EXPECT_TRUE(hits(*tier, 3, 1000));
  EXPECT_EQ(tier->usage().corruptions, 1u);
  EXPECT_EQ(tier->tornTails(), 0u);
  EXPECT_EQ(fs::file_size(seg(1)), 3 * rec);  // the damaged record stays as dead bytes
  EXPECT_EQ(tier->usage().bytesUsed, 3 * rec);
}

TEST_F(DiskTierTest, TornTailDropsOnlyTheBrokenRecord) {
  const uint64_t rec = kHeader + 1000;
  {
    auto tier = open();
    for (uint64_t f = 1; f <= 3; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 1000)));
  }
  fs::resize_file(seg(1), 2 * rec + kHeader + 10);  // record 3 half written
  {
    auto tier = open();
    EXPECT_TRUE(hits(*tier, 1, 1000));
    EXPECT_TRUE(hits(*tier, 2, 1000));
    EXPECT_FALSE(tier->contains(keyOf(3)));
    EXPECT_EQ(tier->usage().chunks, 2u);
    EXPECT_EQ(fs::file_size(seg(1)), 2 * rec);
    EXPECT_EQ(tier->tornTails(), 1u);  // counted apart from corruptions
    EXPECT_EQ(tier->usage().corruptions, 0u);
    ASSERT_TRUE(tier->insert(chunkOf(4, 0, 1000)));  // appends after the cut
  }
  fs::resize_file(seg(1), fs::file_size(seg(1)) + 50);  // a torn header only
  auto tier = open();
  EXPECT_TRUE(hits(*tier, 1, 1000));
  EXPECT_TRUE(hits(*tier, 2, 1000));
  EXPECT_TRUE(hits(*tier, 4, 1000));
  EXPECT_EQ(fs::file_size(seg(1)), 3 * rec);
}

TEST_F(DiskTierTest, ReadErrorMisses) {
  auto tier = open();
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 1000)));
  fs::resize_file(seg(1), 0);  // the record vanished under us
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
  EXPECT_FALSE(tier->contains(keyOf(1)));
  EXPECT_EQ(tier->usage().corruptions, 0u);
}

TEST_F(DiskTierTest, WriteErrorLeavesNoPartialRecord) {
  const uint64_t rec = kHeader + 1000;
  {
    auto tier = open();
    ASSERT_TRUE(tier->insert(chunkOf(1, 0, 1000)));
    {
      FileSizeLimit limit(rec + 500);  // record 2 can only be half written
      EXPECT_FALSE(tier->insert(chunkOf(2, 0, 1000)));
    }
    EXPECT_EQ(fs::file_size(seg(1)), rec);
    EXPECT_FALSE(tier->contains(keyOf(2)));
    EXPECT_EQ(tier->usage().bytesUsed, rec);
    EXPECT_TRUE(tier->healthy());
    ASSERT_TRUE(tier->insert(chunkOf(3, 0, 1000)));
    EXPECT_TRUE(hits(*tier, 3, 1000));
  }
  auto tier = open();
  EXPECT_TRUE(hits(*tier, 1, 1000));
  EXPECT_TRUE(hits(*tier, 3, 1000));
  EXPECT_EQ(tier->usage().chunks, 2u);
}

TEST_F(DiskTierTest, UnhealthyAfterRepeatedWriteErrors) {
  auto tier = open();
  {
    FileSizeLimit limit(100);
    for (int i = 0; i < DiskTierOptions{}.errorsBeforeUnhealthy; ++i) {
      EXPECT_FALSE(tier->insert(chunkOf(1, 0, 1000)));
    }
  }
  EXPECT_FALSE(tier->healthy());
  EXPECT_FALSE(tier->insert(chunkOf(1, 0, 10)));  // refused without trying
  EXPECT_EQ(segmentBytesOnDisk(dir_), 0u);
}

TEST_F(DiskTierTest, SecondOpenRefusedWhileFirstAlive) {
  auto first = open();
  ASSERT_TRUE(first);
  DiskTierOptions o;
  o.dir = dir_;
  o.capacityBytes = 64 * kMiB;
  auto second = DiskTier::open(o);
  ASSERT_FALSE(second.isOk());
  EXPECT_EQ(second.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(second.status().message().find("in use by another epochfs (pid " +
                                           std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.status().toString();
  first.reset();
  auto third = DiskTier::open(o);
  EXPECT_TRUE(third.isOk()) << third.status().toString();
}

TEST_F(DiskTierTest, RefusesDirectoryNotOurs) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another uid";
  ASSERT_EQ(::chown(dir_.c_str(), 12345, 12345), 0);
  DiskTierOptions o;
  o.dir = dir_;
  o.capacityBytes = 64 * kMiB;
  auto t = DiskTier::open(o);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(t.status().message().find("owned by uid 12345"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/LOCK"));
}

TEST_F(DiskTierTest, RefusesBadOptionsAndNonDirectory) {
  DiskTierOptions o;
  o.dir = dir_;
  EXPECT_EQ(DiskTier::open(o).status().code(), Status::Code::kInvalidArgument);  // capacity 0
  std::ofstream(tmp_.path() + "/file") << "x";
  o.dir = tmp_.path() + "/file";
  o.capacityBytes = kMiB;
  EXPECT_EQ(DiskTier::open(o).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(DiskTierTest, ForeignFilesAreLeftUntouched) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  const std::vector<std::string> foreign = {"notes.txt", "seg-1.dat", "seg-000001.dat.bak",
                                            "seg-00000x.dat", "LOCK.old"};
  for (const auto& name : foreign) std::ofstream(dir_ + "/" + name) << "keep " << name;
  ASSERT_EQ(::mkdir((dir_ + "/sub").c_str(), 0700), 0);
  {
    auto tier = open(2 * kMiB, 256 * 1024);
    for (uint64_t f = 1; f <= 40; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 100000)));
    EXPECT_GT(tier->usage().evictions, 0u);
    tier->clear();
  }
  auto tier = open(2 * kMiB, 256 * 1024);
  tier->clear();
  for (const auto& name : foreign) {
    std::ifstream in(dir_ + "/" + name);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(content, "keep " + name);
  }
  EXPECT_TRUE(fs::is_directory(dir_ + "/sub"));
}

TEST_F(DiskTierTest, EvictionKeepsUsageWithinCapacity) {
  const uint64_t cap = 8 * kMiB;
  auto tier = open(cap, 1 * kMiB);
  ASSERT_EQ(tier->segmentBytes(), 1 * kMiB);
  for (uint64_t f = 1; f <= 300; ++f) {
    ASSERT_TRUE(tier->insert(chunkOf(f, 0, 100000 + f)));
    TierUsage u = tier->usage();
    ASSERT_LE(u.bytesUsed, cap + tier->segmentBytes());
    ASSERT_LE(segmentBytesOnDisk(dir_), cap + tier->segmentBytes());
    ASSERT_EQ(segmentBytesOnDisk(dir_), u.bytesUsed);
    ASSERT_TRUE(hits(*tier, f, 100000 + f));
  }
  TierUsage u = tier->usage();
  EXPECT_GT(u.evictions, 0u);
  EXPECT_EQ(u.chunks + u.evictions, 300u);
  EXPECT_LE(tier->segmentCount(), 9u);
  // A smaller capacity on reopen evicts down to it.
  tier.reset();
  tier = open(3 * kMiB, 1 * kMiB);
  EXPECT_LE(tier->usage().bytesUsed, 3 * kMiB);
  EXPECT_TRUE(hits(*tier, 300, 100000 + 300));
}

TEST_F(DiskTierTest, EvictsLeastRecentlyUsedSegment) {
  const size_t bytes = 256 * 1024 - kHeader;  // records of exactly 256 KiB: 4 per segment
  auto tier = open(4 * kMiB, 1 * kMiB);
  for (uint64_t f = 0; f < 16; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, bytes)));
  EXPECT_EQ(tier->segmentCount(), 4u);
  EXPECT_EQ(tier->usage().evictions, 0u);
  ASSERT_TRUE(hits(*tier, 0, bytes));  // segment 1 becomes recently used
  ASSERT_TRUE(tier->insert(chunkOf(16, 0, bytes)));
  EXPECT_EQ(tier->usage().evictions, 4u);
  for (uint64_t f = 0; f <= 16; ++f) {
    EXPECT_EQ(tier->contains(keyOf(f)), f < 4 || f >= 8) << f;  // segment 2 went
  }
  EXPECT_FALSE(fs::exists(seg(2)));
  EXPECT_TRUE(fs::exists(seg(1)));
  EXPECT_TRUE(fs::exists(seg(5)));
}

TEST_F(DiskTierTest, RefusesChunksLargerThanASegment) {
  auto tier = open(64 * kMiB, 1 * kMiB);
  EXPECT_FALSE(tier->insert(chunkOf(1, 0, kMiB)));  // + header > segment
  EXPECT_TRUE(tier->insert(chunkOf(1, 0, kMiB - kHeader)));
  EXPECT_FALSE(tier->insert(nullptr));
}

TEST_F(DiskTierTest, AdaptiveSegmentSize) {
  EXPECT_EQ(open(64 * kMiB, 64 * kMiB)->segmentBytes(), 4 * kMiB);
  EXPECT_EQ(open(1024 * kMiB, 16 * kMiB)->segmentBytes(), 16 * kMiB);
  EXPECT_EQ(open(1024 * kMiB, 256 * kMiB)->segmentBytes(), 64 * kMiB);
}

TEST_F(DiskTierTest, ClearRemovesSegments) {
  auto tier = open(64 * kMiB, 1 * kMiB);
  for (uint64_t f = 1; f <= 30; ++f) ASSERT_TRUE(tier->insert(chunkOf(f, 0, 100000)));
  tier->clear();
  EXPECT_EQ(tier->segmentCount(), 0u);
  EXPECT_EQ(tier->usage().chunks, 0u);
  EXPECT_EQ(tier->usage().bytesUsed, 0u);
  EXPECT_EQ(segmentBytesOnDisk(dir_), 0u);
  EXPECT_TRUE(fs::exists(dir_ + "/LOCK"));
  ASSERT_TRUE(tier->insert(chunkOf(1, 0, 100)));
  EXPECT_TRUE(hits(*tier, 1, 100));
}

TEST_F(DiskTierTest, ConcurrentInsertsAndLookups) {
  const uint64_t cap = 16 * kMiB;
  auto tier = open(cap, 1 * kMiB);
  std::atomic<int> bad{0};
  std::atomic<int> found{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      for (int i = 0; i < 1500; ++i) {
        uint64_t f = rng() % 500;  // ~32 MiB of distinct chunks: segments get evicted
        size_t bytes = 64 * 1024 + f;
        if (rng() % 3 == 0) {
          if (!tier->insert(chunkOf(f, 0, bytes))) bad++;
        } else if (ChunkRef c = tier->lookup(keyOf(f), identityFor(f))) {
          found++;
          if (c->data != dataFor(f, 0, bytes) || !c->verify()) bad++;
        }
        if (tier->usage().bytesUsed > cap + tier->segmentBytes()) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(found.load(), 0);
  TierUsage u = tier->usage();
  EXPECT_EQ(u.corruptions, 0u);
  EXPECT_GT(u.evictions, 0u);
  EXPECT_EQ(segmentBytesOnDisk(dir_), u.bytesUsed);
}

}  // namespace
}  // namespace epochfs::cache
