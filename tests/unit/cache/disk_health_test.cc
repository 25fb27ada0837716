// Unit tests of the disk tier's health (docs/RELIABILITY.md 7b) and of its
// resync over damaged records (3f): injected EIO / ENOSPC / stalls through
// DiskFaults, the unhealthy state, the probe that re-admits the tier, the
// directory removed at run time, and records with an empty checksum or length.
// Each test works in its own mkdtemp directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/checksum.h"
#include "cache/chunk_cache.h"
#include "cache/disk_faults.h"
#include "cache/disk_tier.h"
#include "cache/posix_source.h"
#include "cache/ram_tier.h"
#include "cache/segment_file.h"
#include "tests/unit/scoped_temp_dir.h"

namespace epochfs::cache {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDataset = 7;
constexpr uint64_t kHeader = SegmentFile::kHeaderBytes;
constexpr size_t kBytes = 1000;
constexpr uint64_t kRecord = kHeader + kBytes;

FileIdentity identityFor(uint64_t fileId) {
  return FileIdentity{fileId, kBytes, 100, 101, 9000 + fileId};
}
ChunkKey keyOf(uint64_t fileId) { return ChunkKey::make(kDataset, fileId, 0); }
std::vector<char> dataFor(uint64_t fileId) {
  std::vector<char> d(kBytes);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<char>((fileId * 37 + i * 11) & 0xff);
  return d;
}
ChunkRef chunkOf(uint64_t fileId) {
  return makeChunk(keyOf(fileId), identityFor(fileId), dataFor(fileId));
}
bool hits(DiskTier& t, uint64_t fileId) {
  ChunkRef c = t.lookup(keyOf(fileId), identityFor(fileId));
  return c != nullptr && c->data == dataFor(fileId) && c->verify();
}

RecordHeader readHeader(const std::string& path, uint64_t off) {
  RecordHeader h;
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, &h, sizeof h, static_cast<off_t>(off)), static_cast<ssize_t>(sizeof h));
  ::close(fd);
  return h;
}
void writeHeader(const std::string& path, uint64_t off, const RecordHeader& h) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, &h, sizeof h, static_cast<off_t>(off)), static_cast<ssize_t>(sizeof h));
  ::close(fd);
}

// Polls `cond` for up to `limit`; true once it holds.
template <typename F>
bool eventually(F cond, milliseconds limit = milliseconds(10000)) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return cond();
}

class DiskHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() + "/cache";
    faults_ = std::make_shared<DiskFaults>();
  }
  std::unique_ptr<DiskTier> open(milliseconds deadline = milliseconds(1000),
                                 milliseconds probeInterval = milliseconds(50)) {
    DiskTierOptions o;
    o.dir = dir_;
    o.capacityBytes = 64 << 20;
    o.segmentBytes = 4 << 20;
    o.datasetId = kDataset;
    o.ioDeadline = deadline;
    o.probeInterval = probeInterval;
    o.faults = faults_;
    auto t = DiskTier::open(o);
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    return t.isOk() ? std::move(t).value() : nullptr;
  }
  std::string seg(uint32_t id) const { return dir_ + "/" + SegmentFile::nameFor(id); }

  ::epochfs::testing::ScopedTempDir tmp_{"epochfs-disk-health"};
  std::string dir_;
  std::shared_ptr<DiskFaults> faults_;
};

// PASS: with EIO injected on reads, lookups miss (never wrong bytes); after 3
// read errors the tier is unhealthy and further lookups are skipped without
// I/O; after the fault is cleared a probe re-admits it and the chunks that were
// never looked up during the fault hit again.
TEST_F(DiskHealthTest, ReadErrorsMakeTheTierUnhealthyUntilAProbePasses) {
  auto tier = open();
  for (uint64_t f = 1; f <= 6; ++f) ASSERT_TRUE(tier->insert(chunkOf(f)));
  faults_->set(EIO, 0, milliseconds(0));
  for (uint64_t f = 1; f <= 3; ++f) EXPECT_EQ(tier->lookup(keyOf(f), identityFor(f)), nullptr);
  EXPECT_FALSE(tier->healthy());
  EXPECT_EQ(tier->health().readErrors, 3u);
  EXPECT_EQ(tier->lookup(keyOf(4), identityFor(4)), nullptr);
  EXPECT_EQ(tier->health().readErrors, 3u) << "an unhealthy tier must not touch the disk";
  EXPECT_GE(tier->health().skipped, 1u);
  EXPECT_FALSE(tier->insert(chunkOf(9)));
  ASSERT_TRUE(eventually([&] { return tier->health().probeFailures >= 1; }));  // a probe ran
  EXPECT_FALSE(tier->healthy()) << "the probe passed while reads still fail";
  EXPECT_GE(tier->health().probeFailures, 1u);
  faults_->clear();
  ASSERT_TRUE(eventually([&] { return tier->healthy(); }));
  EXPECT_TRUE(hits(*tier, 4));
  EXPECT_TRUE(hits(*tier, 6));
  EXPECT_EQ(tier->health().unhealthyEvents, 1u);
  ASSERT_TRUE(tier->insert(chunkOf(9)));
  EXPECT_TRUE(hits(*tier, 9));
}

// PASS: with ENOSPC injected on writes, inserts fail and leave no bytes; after
// 3 failures the tier is unhealthy; reads of what it holds are refused too
// (the whole tier is out of use); after clearing, inserts and hits work again.
TEST_F(DiskHealthTest, WriteErrorsMakeTheTierUnhealthyUntilAProbePasses) {
  auto tier = open();
  ASSERT_TRUE(tier->insert(chunkOf(1)));
  faults_->set(0, ENOSPC, milliseconds(0));
  for (uint64_t f = 2; f <= 4; ++f) EXPECT_FALSE(tier->insert(chunkOf(f)));
  EXPECT_FALSE(tier->healthy());
  EXPECT_EQ(tier->health().writeErrors, 3u);
  EXPECT_EQ(fs::file_size(seg(1)), kRecord) << "a failed write left bytes behind";
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
  faults_->clear();
  ASSERT_TRUE(eventually([&] { return tier->healthy(); }));
  EXPECT_TRUE(hits(*tier, 1));
  ASSERT_TRUE(tier->insert(chunkOf(2)));
  EXPECT_TRUE(hits(*tier, 2));
}

// PASS: with every disk I/O stalled 2 s and a 200 ms deadline, a lookup of a
// held chunk returns (a miss) within 1.5 s - a hang detector, not a speed
// bound -, the tier goes unhealthy on that one timeout, inserts are refused at
// once, probes fail while the stall lasts (too slow), and after clearing a
// probe re-admits it and the chunk hits.
TEST_F(DiskHealthTest, StalledDiskCostsOneDeadlineThenIsBypassed) {
  auto tier = open(milliseconds(200));
  ASSERT_TRUE(tier->insert(chunkOf(1)));
  faults_->set(0, 0, milliseconds(2000));
  auto start = Clock::now();
  EXPECT_EQ(tier->lookup(keyOf(1), identityFor(1)), nullptr);
  EXPECT_LT(Clock::now() - start, milliseconds(1500)) << "a lookup waited on a stalled disk";
  EXPECT_FALSE(tier->healthy());
  EXPECT_EQ(tier->health().timeouts, 1u);
  start = Clock::now();
  EXPECT_FALSE(tier->insert(chunkOf(2)));
  EXPECT_LT(Clock::now() - start, milliseconds(500)) << "an insert waited on an unhealthy tier";
  // A probe ran and failed (too slow, or its I/O failed).
  ASSERT_TRUE(eventually([&] { return tier->health().probeFailures >= 1; }, milliseconds(15000)));
  EXPECT_FALSE(tier->healthy());
  faults_->clear();
  ASSERT_TRUE(eventually([&] { return tier->healthy(); }, milliseconds(15000)));
  EXPECT_TRUE(hits(*tier, 1));
}

// PASS: removing the tier's directory under it makes the tier unhealthy; the
// prober recreates the directory (0700, with a fresh LOCK), forgets the old
// segments, and the tier is healthy and admitting chunks again.
TEST_F(DiskHealthTest, RemovedDirectoryIsRecreatedAndReused) {
  auto tier = open();
  ASSERT_TRUE(tier->insert(chunkOf(1)));
  fs::remove_all(dir_);
  ASSERT_TRUE(eventually([&] { return tier->health().unhealthyEvents >= 1; }));
  ASSERT_TRUE(eventually([&] { return tier->healthy(); }));
  EXPECT_TRUE(fs::is_directory(dir_));
  EXPECT_TRUE(fs::exists(dir_ + "/LOCK"));
  EXPECT_FALSE(fs::exists(dir_ + "/PROBE")) << "the probe file was left behind";
  EXPECT_EQ(tier->usage().chunks, 0u);
  EXPECT_EQ(tier->usage().bytesUsed, 0u);
  ASSERT_TRUE(tier->insert(chunkOf(2)));
  EXPECT_TRUE(hits(*tier, 2));
  DiskTierOptions second;
  second.dir = dir_;
  second.capacityBytes = 1 << 20;
  EXPECT_EQ(DiskTier::open(second).status().code(), Status::Code::kUnavailable)
      << "the recreated directory is not locked";
}

enum class Damage { kChecksumZeroedStaleHeader, kChecksumZeroedResealed, kEmptyRecordResealed };

// Damages record 2 of 3 in one segment; returns its header offset.
void damage(const std::string& segment, Damage d) {
  RecordHeader h = readHeader(segment, kRecord);
  switch (d) {
    case Damage::kChecksumZeroedStaleHeader:  // the field zeroed, header checksum now wrong
      h.dataChecksum = 0;
      break;
    case Damage::kChecksumZeroedResealed:  // a well-formed record with an empty checksum
      h.dataChecksum = 0;
      h.headerChecksum = h.computeChecksum();
      break;
    case Damage::kEmptyRecordResealed:  // a well-formed zero-length record
      h.dataLength = 0;
      h.dataChecksum = checksum("", 0);
      h.headerChecksum = h.computeChecksum();
      break;
  }
  writeHeader(segment, kRecord, h);
}

// PASS (3f, at restart): after record 2 of 3 gets an empty checksum (with a
// stale or a resealed header) or becomes an empty record, a reopened tier
// never returns record 2, still serves records 1 and 3 (the rebuild resyncs
// past the damage instead of dropping the rest of the segment) and counts one
// corruption.
TEST_F(DiskHealthTest, EmptyChecksumOrEmptyRecordIsCountedAndSkippedAtRestart) {
  for (Damage d : {Damage::kChecksumZeroedStaleHeader, Damage::kChecksumZeroedResealed,
                   Damage::kEmptyRecordResealed}) {
    SCOPED_TRACE(static_cast<int>(d));
    fs::remove_all(dir_);
    {
      auto tier = open();
      for (uint64_t f = 1; f <= 3; ++f) ASSERT_TRUE(tier->insert(chunkOf(f)));
    }
    damage(seg(1), d);
    auto tier = open();
    EXPECT_TRUE(hits(*tier, 1));
    EXPECT_EQ(tier->lookup(keyOf(2), identityFor(2)), nullptr);
    EXPECT_TRUE(hits(*tier, 3)) << "the records after the damaged one were dropped";
    EXPECT_EQ(tier->usage().corruptions, 1u);
    EXPECT_TRUE(tier->healthy()) << "damage is not a disk failure";
  }
}

// PASS (3f, running tier): the same damage under an open tier is detected at
// lookup (never returned) and counted; records 1 and 3 still hit.
TEST_F(DiskHealthTest, EmptyChecksumOrEmptyRecordIsDetectedWhileRunning) {
  for (Damage d : {Damage::kChecksumZeroedStaleHeader, Damage::kChecksumZeroedResealed,
                   Damage::kEmptyRecordResealed}) {
    SCOPED_TRACE(static_cast<int>(d));
    fs::remove_all(dir_);
    auto tier = open();
    for (uint64_t f = 1; f <= 3; ++f) ASSERT_TRUE(tier->insert(chunkOf(f)));
    damage(seg(1), d);
    EXPECT_EQ(tier->lookup(keyOf(2), identityFor(2)), nullptr);
    EXPECT_EQ(tier->usage().corruptions, 1u);
    EXPECT_TRUE(hits(*tier, 1));
    EXPECT_TRUE(hits(*tier, 3));
  }
}

// PASS: a control file drives the faults (the daemon's test hook): its tokens
// are applied, a bad token changes nothing, and removing the file clears them.
TEST_F(DiskHealthTest, ControlFileDrivesFaults) {
  const std::string ctl = tmp_.path() + "/faults";
  DiskFaults f(ctl);
  EXPECT_TRUE(f.beforeRead("x").isOk());
  std::ofstream(ctl) << "read=eio write=enospc\n";
  // Re-read at most every 50 ms (disk_faults.cc): wait for it to take effect.
  ASSERT_TRUE(eventually([&] { return !f.beforeRead("x").isOk(); }));
  EXPECT_EQ(f.beforeRead("x").code(), Status::Code::kIoError);
  EXPECT_EQ(f.beforeWrite("x").code(), Status::Code::kNoSpace);
  EXPECT_FALSE(f.parse("read=sometimes"));
  EXPECT_EQ(f.beforeRead("x").code(), Status::Code::kIoError);
  fs::remove(ctl);
  ASSERT_TRUE(eventually([&] { return f.beforeRead("x").isOk(); }));
  EXPECT_TRUE(f.beforeRead("x").isOk());
  EXPECT_TRUE(f.beforeWrite("x").isOk());
}

// PASS: a disk record that verifies but has the wrong length for its chunk
// (here 10 bytes for a 1000-byte file) is never served by ChunkCache: the
// read returns the source's bytes, and the record is dropped and counted.
TEST_F(DiskHealthTest, ChunkCacheRefusesADiskChunkOfTheWrongLength) {
  const std::string src = tmp_.path() + "/src";
  fs::create_directories(src);
  const std::vector<char> bytes = dataFor(5);
  std::ofstream(src + "/f", std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  auto source = PosixSource::open(src);
  ASSERT_TRUE(source.isOk()) << source.status().toString();
  struct stat st;
  ASSERT_EQ(::stat((src + "/f").c_str(), &st), 0);
  const FileIdentity id = identityOf("f", st);
  auto tier = open();
  RamTier ram(1 << 20);
  ChunkCache cache(ChunkCache::Options{kDataset, 1 << 20}, **source, ram, tier.get());
  const ChunkKey key = cache.keyFor(id.fileId, 0);
  ASSERT_TRUE(
      tier->insert(makeChunk(key, id, std::vector<char>(bytes.begin(), bytes.begin() + 10))));
  ChunkCache::Tier from;
  auto got = cache.get("f", id, 0, &from);
  ASSERT_TRUE(got.isOk()) << got.status().toString();
  EXPECT_EQ(got.value()->data, bytes);
  EXPECT_EQ(from, ChunkCache::Tier::kSource);
  EXPECT_EQ(tier->usage().corruptions, 1u);
}

}  // namespace
}  // namespace epochfs::cache
