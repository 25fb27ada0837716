// Fault-injection tests of the disk tier (issue 7, cases 3, 6, 7 (part), 9
// (part) and 10), label `fault`. Each test states its pass criterion. They
// mount the real daemon through tests/integration/mount_fixture.h and always
// unmount (a tmpfs they mount is detached in TearDown too).
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <glob.h>
#include <thread>

#include "cache/segment_file.h"
#include "tests/integration/mount_fixture.h"

// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3.
#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {
namespace {

constexpr size_t kFileBytes = 400 * 1000;  // one 1 MiB chunk per file, equal record sizes

struct Files {
  std::map<std::string, std::string> data;  // name -> bytes
  std::map<uint64_t, std::string> byHash;   // xxh3 -> name
};

Files makeFiles(const std::string& src, int n, size_t bytes, uint64_t seed) {
  Files f;
  for (int i = 0; i < n; ++i) {
    std::string name = "f" + std::to_string(i) + ".bin";
    std::string d = randomBytes(bytes, seed * 100 + static_cast<uint64_t>(i));
    writeFile(src + "/" + name, d);
    f.byHash[xxh3(d)] = name;
    f.data[name] = std::move(d);
  }
  return f;
}

// Reads every file through the mount; returns how many were not bit-exact
// (a read error counts as wrong and is reported with its errno).
int verifyAll(const std::string& mnt, const Files& f) {
  int bad = 0;
  for (const auto& [name, want] : f.data) {
    auto r = readFile(mnt + "/" + name);
    if (r.err != 0 || r.data != want) {
      if (++bad <= 5) {
        ADD_FAILURE() << name << ": " << (r.err ? strerror(r.err) : "WRONG BYTES SERVED")
                      << " (" << r.data.size() << " of " << want.size() << " bytes)";
      }
    }
  }
  return bad;
}

uint64_t num(const nlohmann::json& j, std::string_view path) {
  return counter(j, path).value_or(0);
}
uint64_t sourceIo(const nlohmann::json& j) {
  if (auto v = counter(j, "tiers.source.read_bytes")) return *v;
  return num(j, "tiers.source.bytes");
}

std::vector<std::string> globPaths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

struct Record {
  std::string segment;
  uint64_t offset = 0;  // of the header
  uint64_t length = 0;  // data bytes
  std::string file;     // dataset file whose bytes it holds ("" if unknown)
};

// Walks every segment's records (cache/segment_file.h layout).
std::vector<Record> records(const std::string& cacheDir, const Files& f) {
  std::vector<Record> out;
  for (const auto& seg : globPaths(cacheDir + "/epochfs-*/seg-*.dat")) {
    std::string bytes = readFile(seg).data;
    uint64_t off = 0;
    while (off + sizeof(cache::RecordHeader) <= bytes.size()) {
      cache::RecordHeader h;
      std::memcpy(&h, bytes.data() + off, sizeof h);
      if (!h.valid() || off + sizeof h + h.dataLength > bytes.size()) break;
      Record r{seg, off, h.dataLength, ""};
      auto it = f.byHash.find(xxh3(std::string_view(bytes).substr(off + sizeof h, h.dataLength)));
      if (it != f.byHash.end()) r.file = it->second;
      out.push_back(r);
      off += sizeof h + h.dataLength;
    }
  }
  return out;
}

void patch(const std::string& path, uint64_t off, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
  ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(off)),
            static_cast<ssize_t>(bytes.size()));
  close(fd);
}
void flipByte(const std::string& path, uint64_t off) {
  std::string b = readFile(path).data;
  ASSERT_LT(off, b.size());
  patch(path, off, std::string(1, static_cast<char>(b[off] ^ 0x5a)));
}

enum class Damage { kHeaderByte, kTruncate, kCopyOver, kDataByteLive };

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
// dropped at restart. A second pass is bit-exact too.
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
  }
  if (damage != Damage::kDataByteLive) {
    r = t.mountAt(src, mnt, options);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
  }
  auto before = adminRequest(mnt, {{"cmd", "stats"}});
  t.dropCaches(mnt);
  // The victim first, so that it is not in the (1 MiB) RAM tier.
  auto got = readFile(mnt + "/" + victim.file);
  EXPECT_EQ(got.err, 0) << strerror(got.err);
  EXPECT_TRUE(got.data == f.data.at(victim.file)) << "damaged record served for " << victim.file;
  EXPECT_EQ(verifyAll(mnt, f), 0) << "after the damage";
  auto after = adminRequest(mnt, {{"cmd", "stats"}});
  ASSERT_TRUE(after.value("ok", false)) << after.dump();
  EXPECT_GE(sourceIo(after) - sourceIo(before), kFileBytes)
      << "the victim was not re-read from the source: " << after.dump();
  RecordProperty("corruptions", std::to_string(num(after, "tiers.disk.corruptions")));
  if (damage == Damage::kDataByteLive) {
    EXPECT_GE(num(after, "tiers.disk.corruptions"), 1u) << after.dump();
  }
  t.dropCaches(mnt);
  EXPECT_EQ(verifyAll(mnt, f), 0) << "second pass";
}

TEST_F(DiskFaultTest, FlippedHeaderByteIsNeverServed) {
  runCorruption(Damage::kHeaderByte);
}
TEST_F(DiskFaultTest, TruncatedSegmentIsNeverServed) {
  runCorruption(Damage::kTruncate);
}
TEST_F(DiskFaultTest, ValidRecordOfAnotherFileCopiedOverIsNeverServed) {
  runCorruption(Damage::kCopyOver);
}
// Data flip under a running daemon (the restart variant is
// tests/integration/cache_tiers_test.cc:CorruptedDiskChunkIsDetectedAndRefetched);
// here additionally tiers.disk.corruptions must grow.
TEST_F(DiskFaultTest, FlippedDataByteUnderRunningDaemonIsDetected) {
  runCorruption(Damage::kDataByteLive);
}

// ---- case 7 (part): the cache directory removed at run time --------------------

// PASS: after `rm -rf CACHE/epochfs-*` under a running daemon, two more passes
// are bit-exact with no read error and the daemon still answers stats.
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
  // PASS: a dataset larger than the tmpfs, read three times (two with the
  // page cache dropped): every file bit-exact, no read error (no ENOSPC
  // reaches a reader), the daemon still answers stats and its disk usage is
  // within the filesystem.
  void readThrough(const Files& f) {
    auto r = mount({"--cache-dir", tmpfs_, "--ram-cache", "1M", "--disk-cache", "64M"});
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    for (int pass = 0; pass < 3; ++pass) {
      if (pass) dropCaches();
      EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass " << pass;
    }
    auto s = stats();
    ASSERT_TRUE(s.value("ok", false)) << s.dump();
    RecordProperty("disk_used", std::to_string(num(s, "tiers.disk.used_bytes")));
  }
  std::string tmpfs_;
};

TEST_F(DiskFullTest, SmallTmpfsCacheDirBytesFull) {
  mountTmpfs("size=8m,mode=0755");
  if (IsSkipped() || HasFatalFailure()) return;
  Files f = makeFiles(src_, 40, kFileBytes, 81);  // 16 MB over an 8 MiB filesystem
  readThrough(f);
}

TEST_F(DiskFullTest, TmpfsWithFewInodes) {
  mountTmpfs("size=64m,nr_inodes=4,mode=0755");
  if (IsSkipped() || HasFatalFailure()) return;
  Files f = makeFiles(src_, 40, kFileBytes, 82);  // needs > 4 segments of 4 MiB
  readThrough(f);
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
  auto r2 = mountAt(src_, mnt2, opts(), 30);
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
