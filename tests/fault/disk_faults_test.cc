// Fault-injection tests of the disk tier (RELIABILITY.md cases 3, 6, 7 (part), 9
// (part) and 10), label `fault`. Each test states its pass criterion. They
// mount the real daemon through tests/integration/mount_fixture.h and always
// unmount (a tmpfs they mount is detached in TearDown too).
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "cache/segment_file.h"
#include "fusefs/admin_protocol.h"
#include "tests/fault/disk_test_util.h"
#include "tests/integration/mount_fixture.h"

// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3.
#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {
namespace {

enum class Damage {
  kHeaderByte,
  kTruncate,
  kCopyOver,
  kDataByteLive,
  kEmptyChecksum,  // 3f: the checksum field zeroed, header resealed
  kEmptyRecord,    // 3f: a well-formed zero-length record in place of the victim's header
};

class DiskFaultTest : public MountTest {
 protected:
  std::vector<std::string> opts() const {
    return {"--cache-dir", cache_, "--ram-cache", "1M", "--disk-cache", "256M"};
  }
  void runCorruption(Damage damage);
};

// ---- case 3: disk-tier corruption ----------------------------------------------

// Warm the disk tier, damage one record (the victim), remount (or, for the
// live variant, keep the daemon running), read everything again.
// PASS: every file bit-exact with no read error (never a damaged byte served),
// and the victim's bytes were re-read from the source (source read bytes >=
// its size): the damage was detected (tiers.disk.corruptions) or the record
// dropped at restart. A second pass is bit-exact too. Where the damage is
// detectable (a bad header, an empty checksum, an empty record, a bad data
// byte) tiers.disk.corruptions >= 1, also when it is found by the index
// rebuild at restart; and the records after the victim in its segment are
// still served from the disk tier (the rebuild resyncs past the damage):
// tiers.disk.hit_chunks grows by >= the number of records that survive.
void DiskFaultTest::runCorruption(Damage damage) {
  DiskFaultTest& t = *this;
  const std::string &src = src_, &mnt = mnt_, &cache = cache_;
  const std::vector<std::string> options = opts();
  Files f = makeFiles(src, 6, kFileBytes, 3 + static_cast<int>(damage));
  auto r = t.mountAt(src, mnt, options);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(verifyAll(mnt, f), 0) << "cold pass";
  if (damage != Damage::kDataByteLive) {
    ASSERT_TRUE(t.unmount(mnt));
  }

  auto recs = records(cache, f);
  ASSERT_GE(recs.size(), 4u) << "expected one record per file in the segments";
  const Record& victim = recs[2];
  ASSERT_FALSE(victim.file.empty());
  const uint64_t hdr = sizeof(cache::RecordHeader);
  switch (damage) {
    case Damage::kHeaderByte:
      flipByte(victim.segment, victim.offset + 20);  // inside keyHash
      break;
    case Damage::kTruncate:
      ASSERT_EQ(truncate(victim.segment.c_str(),
                         static_cast<off_t>(victim.offset + hdr + victim.length / 2)),
                0);
      break;
    case Damage::kCopyOver: {  // a valid record of another file over the victim
      const Record& a = recs[0];
      ASSERT_EQ(a.length, victim.length);
      std::string seg = readFile(a.segment).data;
      patch(victim.segment, victim.offset, seg.substr(a.offset, hdr + a.length));
      break;
    }
    case Damage::kDataByteLive:
      flipByte(victim.segment, victim.offset + hdr + victim.length / 2);
      break;
    case Damage::kEmptyChecksum:
    case Damage::kEmptyRecord: {
      cache::RecordHeader h;
      std::string seg = readFile(victim.segment).data;
      std::memcpy(&h, seg.data() + victim.offset, sizeof h);
      if (damage == Damage::kEmptyChecksum) {
        h.dataChecksum = 0;
      } else {
        h.dataLength = 0;
        h.dataChecksum = xxh3("");
      }
      h.headerChecksum = h.computeChecksum();
      patch(victim.segment, victim.offset,
            std::string(reinterpret_cast<const char*>(&h), sizeof h));
      break;
    }
  }
  if (damage != Damage::kDataByteLive) {
    r = t.mountAt(src, mnt, options);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
  }
  auto before = adminRequest(mnt, {{"cmd", admin::kCmdStats}});
  t.dropCaches(mnt);
  // The victim first, so that it is not in the (1 MiB) RAM tier.
  auto got = readFile(mnt + "/" + victim.file);
  EXPECT_EQ(got.err, 0) << strerror(got.err);
  EXPECT_TRUE(got.data == f.data.at(victim.file)) << "damaged record served for " << victim.file;
  EXPECT_EQ(verifyAll(mnt, f), 0) << "after the damage";
  auto after = adminRequest(mnt, {{"cmd", admin::kCmdStats}});
  ASSERT_TRUE(after.value("ok", false)) << after.dump();
  EXPECT_GE(sourceIo(after) - sourceIo(before), kFileBytes)
      << "the victim was not re-read from the source: " << after.dump();
  RecordProperty("corruptions", std::to_string(num(after, "tiers.disk.corruptions")));
  if (damage != Damage::kTruncate && damage != Damage::kCopyOver) {
    EXPECT_GE(num(after, "tiers.disk.corruptions"), 1u) << after.dump();
  }
  // Records that must still be disk hits: all but the victim after a restart
  // (the RAM tier starts empty), except that a truncation loses the records
  // after the cut and a copy-over duplicates a key; the live variant's RAM
  // tier still holds some files, so only the first two count there.
  uint64_t survivors = recs.size() - 1;
  if (damage == Damage::kTruncate) survivors = 2;
  if (damage == Damage::kCopyOver) survivors = recs.size() - 2;
  if (damage == Damage::kDataByteLive) survivors = 2;
  // hit_chunks counts read pieces served from the tier: >= 1 per file it had.
  const uint64_t diskHits =
      num(after, "tiers.disk.hit_chunks") - num(before, "tiers.disk.hit_chunks");
  RecordProperty("disk_hit_chunks", std::to_string(diskHits));
  EXPECT_GE(diskHits, survivors)
      << "records after the damaged one were not served from the disk tier: " << after.dump();
  t.dropCaches(mnt);
  EXPECT_EQ(verifyAll(mnt, f), 0) << "second pass";
}

TEST_F(DiskFaultTest, FlippedHeaderByteIsNeverServed) { runCorruption(Damage::kHeaderByte); }
TEST_F(DiskFaultTest, TruncatedSegmentIsNeverServed) { runCorruption(Damage::kTruncate); }
TEST_F(DiskFaultTest, ValidRecordOfAnotherFileCopiedOverIsNeverServed) {
  runCorruption(Damage::kCopyOver);
}
// Data flip under a running daemon (the restart variant is
// tests/integration/cache_tiers_test.cc:CorruptedDiskChunkIsDetectedAndRefetched);
// here additionally tiers.disk.corruptions must grow.
TEST_F(DiskFaultTest, FlippedDataByteUnderRunningDaemonIsDetected) {
  runCorruption(Damage::kDataByteLive);
}
// Case 3f: a record whose checksum field is zeroed (header resealed, so only
// the data check can catch it), then restart.
TEST_F(DiskFaultTest, EmptyChecksumRecordIsNeverServed) { runCorruption(Damage::kEmptyChecksum); }
// Case 3f: a well-formed zero-length record over the victim's header (its old
// data now looks like garbage to the rebuild), then restart.
TEST_F(DiskFaultTest, EmptyRecordIsNeverServedAndTheRestSurvives) {
  runCorruption(Damage::kEmptyRecord);
}

// ---- case 7 (part): the cache directory removed at run time --------------------

// PASS: after `rm -rf CACHE/epochfs-*` under a running daemon, two more passes
// are bit-exact with no read error and the daemon still answers stats; the
// disk tier goes unhealthy (tiers.disk.unhealthy_events >= 1), recreates its
// directory and is healthy again within 15 s, and is used again: a pass after
// a re-admitting pass gets disk hits for at least half the files.
TEST_F(DiskFaultTest, CacheDirRemovedWhileMounted) {
  Files f = makeFiles(src_, 8, kFileBytes, 71);
  auto r = mount(opts());
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(verifyAll(mnt_, f), 0);
  auto dirs = globPaths(cache_ + "/epochfs-*");
  ASSERT_EQ(dirs.size(), 1u);
  removeTree(dirs[0]);
  ASSERT_NE(access(dirs[0].c_str(), F_OK), 0) << "could not remove " << dirs[0];
  for (int pass = 0; pass < 2; ++pass) {
    dropCaches();
    EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass " << pass;
  }
  auto s = stats();
  EXPECT_TRUE(s.value("ok", false)) << s.dump();
  bool recovered = false;
  for (int i = 0; i < 150 && !recovered; ++i) {
    s = stats();
    recovered =
        num(s, "tiers.disk.unhealthy_events") >= 1 && s["tiers"]["disk"].value("healthy", false);
    if (!recovered) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(recovered) << "the disk tier did not go unhealthy and back: " << s.dump();
  EXPECT_EQ(access(dirs[0].c_str(), F_OK), 0) << dirs[0] << " was not recreated";
  dropCaches();
  EXPECT_EQ(verifyAll(mnt_, f), 0) << "re-admitting pass";
  const uint64_t hitsBefore = num(stats(), "tiers.disk.hit_chunks");
  dropCaches();
  EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass after recovery";
  s = stats();
  EXPECT_GE(num(s, "tiers.disk.hit_chunks") - hitsBefore, f.data.size() / 2)
      << "the recreated disk tier is not used: " << s.dump();
}

// ---- case 6: disk tier full --------------------------------------------------

class DiskFullTest : public DiskFaultTest {
 protected:
  void mountTmpfs(const std::string& opts) {
    tmpfs_ = root_ + "/tmpfs";
    ASSERT_EQ(mkdir(tmpfs_.c_str(), 0755), 0);
    if (::mount("tmpfs", tmpfs_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      int e = errno;
      tmpfs_.clear();
      GTEST_SKIP() << "cannot mount a tmpfs (" << strerror(e) << ")";
    }
  }
  void TearDown() override {
    // The FUSE mount first (its daemon holds files on the tmpfs), then the tmpfs.
    if (!mnt_.empty() && isMounted(mnt_)) {
      EXPECT_TRUE(unmount());
    }
    if (!tmpfs_.empty() && umount2(tmpfs_.c_str(), 0) != 0) {
      EXPECT_EQ(umount2(tmpfs_.c_str(), MNT_DETACH), 0) << strerror(errno);
    }
    MountTest::TearDown();
  }
  // Bytes in use on the tmpfs (statvfs: also counts segments already unlinked
  // but still open).
  uint64_t tmpfsUsed() const {
    struct statvfs v;
    if (statvfs(tmpfs_.c_str(), &v) != 0) return 0;
    return (v.f_blocks - v.f_bfree) * v.f_frsize;
  }
  // PASS: a dataset larger than the tmpfs (or the limit), read three times
  // (two with the page cache dropped): every file bit-exact, no read error (no
  // ENOSPC reaches a reader), the daemon still answers stats, and (case 6c)
  // the bytes used on the tmpfs, sampled every 5 ms while reading, never exceed
  // the configured --disk-cache limit plus one chunk (1 MiB), and
  // tiers.disk.used_bytes <= tiers.disk.capacity_bytes.
  void readThrough(const Files& f, const std::string& diskCache, uint64_t limitBytes) {
    auto r = mount({"--cache-dir", tmpfs_, "--ram-cache", "1M", "--disk-cache", diskCache});
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    std::atomic<bool> done{false};
    std::atomic<uint64_t> peak{0};
    std::thread sampler([&] {
      while (!done) {
        uint64_t used = tmpfsUsed();
        if (used > peak) peak = used;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    for (int pass = 0; pass < 3; ++pass) {
      if (pass) dropCaches();
      EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass " << pass;
    }
    done = true;
    sampler.join();
    auto s = stats();
    ASSERT_TRUE(s.value("ok", false)) << s.dump();
    RecordProperty("disk_used", std::to_string(num(s, "tiers.disk.used_bytes")));
    RecordProperty("tmpfs_peak_used", std::to_string(peak.load()));
    EXPECT_LE(peak.load(), limitBytes + (1u << 20)) << "disk usage over the limit plus one chunk";
    EXPECT_LE(num(s, "tiers.disk.used_bytes"), num(s, "tiers.disk.capacity_bytes")) << s.dump();
  }
  std::string tmpfs_;
};

TEST_F(DiskFullTest, SmallTmpfsCacheDirBytesFull) {
  mountTmpfs("size=8m,mode=0755");
  if (IsSkipped() || HasFatalFailure()) return;
  Files f = makeFiles(src_, 40, kFileBytes, 81);  // 16 MB over an 8 MiB filesystem
  readThrough(f, "64M", 64u << 20);
}

// Case 6c with the limit below the filesystem's size: 16 MB through a 6 MiB
// limit on a 64 MiB tmpfs (the limit, not ENOSPC, is what bounds it).
TEST_F(DiskFullTest, UsageStaysWithinTheLimitPlusOneChunk) {
  mountTmpfs("size=64m,mode=0755");
  if (IsSkipped() || HasFatalFailure()) return;
  Files f = makeFiles(src_, 40, kFileBytes, 83);
  readThrough(f, "6M", 6u << 20);
  auto s = stats();
  EXPECT_GT(num(s, "tiers.disk.evictions"), 0u) << "the limit was never reached: " << s.dump();
  EXPECT_TRUE(s["tiers"]["disk"].value("healthy", false)) << s.dump();
}

TEST_F(DiskFullTest, TmpfsWithFewInodes) {
  mountTmpfs("size=64m,nr_inodes=4,mode=0755");
  if (IsSkipped() || HasFatalFailure()) return;
  Files f = makeFiles(src_, 40, kFileBytes, 82);  // needs > 4 segments of 4 MiB
  readThrough(f, "64M", 64u << 20);
}

// ---- case 10 and 9 (part): the cache-dir lock, a killed daemon ------------------

// PASS: (a) a second daemon on the same cache dir exits non-zero with one
// `epochfs: ...` line and mounts nothing; (b) after the first daemon is
// SIGKILLed in the middle of a cold pass (chunks being written), its mount
// answers ENOTCONN until `fusermount3 -u MNT` (the documented recovery); a new
// daemon then takes the lock, and two passes over the warm disk tier are
// bit-exact (no half-written record is served).
TEST_F(DiskFaultTest, SecondDaemonRefusedAndLockReclaimedAfterKill) {
  Files f = makeFiles(src_, 30, kFileBytes, 91);
  // Single-process mode: a killed daemon leaves ENOTCONN (with the default
  // supervisor it is restarted: tests/fault/supervisor_test.cc).
  auto single = opts();
  single.push_back("--no-supervisor");
  auto r = mount(single);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(readFile(mnt_ + "/f0.bin").data, f.data.at("f0.bin"));

  std::string mnt2 = root_ + "/mnt2";
  ASSERT_EQ(mkdir(mnt2.c_str(), 0755), 0);
  auto own = opts();
  own.push_back("--own-daemon");  // not a mount joining the running daemon
  auto r2 = mountAt(src_, mnt2, own, 30);
  EXPECT_NE(r2.exitCode, 0) << "a second daemon started on a locked cache dir: " << r2.describe();
  EXPECT_TRUE(oneEpochfsLine(r2, {"lock", "in use", "busy", "another", "cache"}));
  EXPECT_FALSE(isMounted(mnt2));

  pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  std::atomic<bool> stop{false};
  std::thread reader([&] {  // cold reads: the daemon is appending records
    for (const auto& [name, d] : f.data) {
      if (stop) break;
      readFile(mnt_ + "/" + name);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  stop = true;
  reader.join();
  waitForExit(pid, 10);
  struct stat st;
  int rc = stat(mnt_.c_str(), &st);
  int statErrno = errno;
  EXPECT_NE(rc, 0);
  EXPECT_EQ(statErrno, ENOTCONN) << "a killed daemon's mount should say ENOTCONN";
  ASSERT_TRUE(unmountPath(mnt_)) << "fusermount3 -u did not recover the stale mount";
  unmount();  // forget it in the fixture (already unmounted)

  r = mount(opts());
  ASSERT_EQ(r.exitCode, 0) << "lock of a dead daemon not reclaimed: " << r.describe();
  for (int pass = 0; pass < 2; ++pass) {
    dropCaches();
    EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass " << pass;
  }
  auto s = stats();
  EXPECT_GE(num(s, "tiers.disk.hit_chunks"), 1u) << "warm disk tier not used: " << s.dump();
}

}  // namespace
}  // namespace epochfs::itest
