// RELIABILITY.md case 5 (part): the source changes beneath another layer. The
// daemon's source is a bindfs mount of a private directory and every change is
// made in the private directory, so the daemon cannot learn of it by inotify on
// its source path (as on NFS or Lustre). Mounted with --revalidate 1.
// Label `fault`. Same-size-new-mtime and growth through the plain source are
// in tests/integration/revalidate_test.cc. Case 5f (ctime-only change, rename
// over, append) is at the end: there the old version is also held in the
// kernel's page cache (a pre-opened descriptor and an mmap) when it changes.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/integration/mount_fixture.h"

#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {
namespace {

constexpr size_t kBytes = 300 * 1000;
constexpr time_t kOldMtime = 1600000000;
constexpr time_t kNewMtime = 1600000500;
// The revalidation age (1 s) plus the bindfs layer's own attribute cache (1 s).
constexpr int kSettleMs = 2500;

class SourceChangeTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (access("/usr/bin/bindfs", X_OK) != 0) GTEST_SKIP() << "bindfs not installed";
    priv_ = root_ + "/private";
    ASSERT_EQ(mkdir(priv_.c_str(), 0700), 0);
    old_ = randomBytes(kBytes, 500);
    writeFile(priv_ + "/data.bin", old_);
    setMtime(kOldMtime);
    auto r = runProcess({"/usr/bin/bindfs", priv_, src_}, 30);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    ASSERT_TRUE(waitMounted(src_, true, 10));
    r = mount({"--revalidate", "1", "--ram-cache", "64M"});
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    ASSERT_TRUE(readFile(mnt_ + "/data.bin").data == old_);
  }
  void TearDown() override {
    if (!mnt_.empty() && isMounted(mnt_)) {
      EXPECT_TRUE(unmount());
    }
    if (!src_.empty() && isMounted(src_)) {
      EXPECT_TRUE(unmountPath(src_));
    }
    MountTest::TearDown();
  }
  std::string priv() const { return priv_ + "/data.bin"; }
  void setMtime(time_t t) {
    timespec ts[2] = {{t, 0}, {t, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, priv().c_str(), ts, 0), 0);
  }
  void rewriteSameSize(const std::string& data) {
    int fd = open(priv().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    close(fd);
    setMtime(kNewMtime);
  }
  static void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs)); }
  // The whole-file result must be all-old, all-new or an error, never a mix.
  static std::string classify(const ReadResult& r, const std::string& oldB,
                              const std::string& newB) {
    if (r.err) return std::string("error ") + strerror(r.err);
    if (r.data == oldB) return "old";
    if (r.data == newB) return "new";
    return "MIX";
  }
  std::string priv_, old_;
};

// PASS: a fresh open+read after the revalidation age returns exactly the new bytes.
TEST_F(SourceChangeTest, SameSizeNewMtimeGivesNewBytes) {
  std::string fresh = randomBytes(kBytes, 501);
  rewriteSameSize(fresh);
  settle();
  auto got = readFile(mnt_ + "/data.bin");
  EXPECT_EQ(classify(got, old_, fresh), "new");
}

// PASS: after truncation to 1000 bytes, stat and read give the new size and
// exactly the new bytes (the old file's first 1000 bytes).
TEST_F(SourceChangeTest, TruncatedGivesNewSize) {
  ASSERT_EQ(truncate(priv().c_str(), 1000), 0);
  setMtime(kNewMtime);
  settle();
  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/data.bin").c_str(), &st), 0) << strerror(errno);
  EXPECT_EQ(st.st_size, 1000);
  EXPECT_EQ(classify(readFile(mnt_ + "/data.bin"), old_, old_.substr(0, 1000)), "new");
}

// PASS: after deletion, open fails with ENOENT.
TEST_F(SourceChangeTest, DeletedGivesEnoent) {
  ASSERT_EQ(unlink(priv().c_str()), 0);
  settle();
  auto got = readFile(mnt_ + "/data.bin");
  EXPECT_EQ(got.err, ENOENT) << classify(got, old_, "");
}

// PASS: after chmod 000 (root daemon: may still be readable), the result is
// all-old bytes or an error (EACCES), never a mix.
TEST_F(SourceChangeTest, MadeUnreadableGivesOldBytesOrError) {
  ASSERT_EQ(chmod(priv().c_str(), 0), 0);
  settle();
  auto c = classify(readFile(mnt_ + "/data.bin"), old_, old_);
  EXPECT_NE(c, "MIX");
  RecordProperty("result", c);
}

// PASS: a file read in two halves on one descriptor, its content replaced
// (same size, new mtime) between the halves and the revalidation age passed:
// the concatenation is all-old or all-new, or the second half fails — never
// old bytes followed by new ones.
TEST_F(SourceChangeTest, ReadAcrossTheChangeIsNeverAMix) {
  std::string fresh = randomBytes(kBytes, 502);
  dropCaches();
  int fd = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << strerror(errno);
  std::string got(kBytes, '\0');
  const size_t half = 128 * 1024;  // page aligned
  ASSERT_EQ(pread(fd, got.data(), half, 0), static_cast<ssize_t>(half));
  rewriteSameSize(fresh);
  settle();
  ssize_t n = pread(fd, got.data() + half, kBytes - half, half);
  int e = errno;
  close(fd);
  ReadResult r;
  if (n != static_cast<ssize_t>(kBytes - half)) {
    r.err = n < 0 ? e : EIO;
  } else {
    r.data = got;
  }
  auto c = classify(r, old_, fresh);
  EXPECT_NE(c, "MIX") << "old bytes followed by new ones on one descriptor";
  RecordProperty("result", c);
}

// ---- case 5f: changes only ctime/inode/size can reveal -------------------------

// Reads `len` bytes of an existing shared mapping in a forked child (a fault
// on a page the kernel can no longer fill is SIGBUS there, not here).
ReadResult readMapping(const char* p, size_t len) {
  int fds[2];
  if (pipe(fds) != 0) return {errno, ""};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    for (size_t off = 0; off < len;) {
      ssize_t n = write(fds[1], p + off, std::min<size_t>(len - off, 65536));
      if (n <= 0) _exit(2);
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  ReadResult r;
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.data.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  auto st = waitForExit(pid, 30);
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    r.err = EIO;  // SIGBUS: the old version's pages are gone and cannot be re-read
    r.data.clear();
  }
  return r;
}

class SourceChange5fTest : public SourceChangeTest {
 protected:
  // Holds the old version in the page cache: a descriptor that read it all
  // and a shared mapping whose every page was touched (mincore: resident).
  void holdOldVersion() {
    pre_ = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
    ASSERT_GE(pre_, 0) << strerror(errno);
    std::string buf(kBytes, '\0');
    ASSERT_EQ(pread(pre_, buf.data(), kBytes, 0), static_cast<ssize_t>(kBytes));
    ASSERT_TRUE(buf == old_);
    map_ = static_cast<char*>(mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, pre_, 0));
    ASSERT_NE(map_, MAP_FAILED) << strerror(errno);
    ASSERT_EQ(std::memcmp(map_, old_.data(), kBytes), 0);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((kBytes + page - 1) / page);
    ASSERT_EQ(mincore(map_, kBytes, vec.data()), 0);
    size_t resident = 0;
    for (unsigned char v : vec) resident += v & 1;
    EXPECT_EQ(resident, vec.size()) << "the old version is not all in the page cache";
  }
  void TearDown() override {
    if (map_ != nullptr && map_ != MAP_FAILED) munmap(map_, kBytes);
    if (pre_ >= 0) close(pre_);
    SourceChangeTest::TearDown();
  }
  // After the change and the revalidation age: stat through the mount shows
  // the source's new size/mtime/ctime; fresh opens get exactly `fresh` (also
  // right after a stat, which revalidates before the open does); the
  // pre-opened descriptor and the old mapping give all-old, all-new or an
  // error, never a mix.
  void expectNewVersion(const std::string& fresh) {
    settle();
    struct stat want, got;
    ASSERT_EQ(stat((src_ + "/data.bin").c_str(), &want), 0);
    ASSERT_EQ(stat((mnt_ + "/data.bin").c_str(), &got), 0) << strerror(errno);
    EXPECT_EQ(got.st_size, want.st_size);
    EXPECT_EQ(got.st_mtim.tv_sec, want.st_mtim.tv_sec);
    EXPECT_EQ(got.st_mtim.tv_nsec, want.st_mtim.tv_nsec);
    EXPECT_EQ(got.st_ctim.tv_sec, want.st_ctim.tv_sec);
    EXPECT_EQ(got.st_ctim.tv_nsec, want.st_ctim.tv_nsec);
    // The stat above revalidated; this open must still not see the old pages.
    EXPECT_EQ(classify(readFile(mnt_ + "/data.bin"), old_, fresh), "new") << "fresh open";
    std::string viaOld(static_cast<size_t>(std::max<off_t>(got.st_size, kBytes)) + 1, '\0');
    ssize_t n = pread(pre_, viaOld.data(), viaOld.size(), 0);
    ReadResult r;
    if (n < 0) {
      r.err = errno;
    } else {
      r.data = viaOld.substr(0, static_cast<size_t>(n));
    }
    auto c = classify(r, old_, fresh);
    EXPECT_NE(c, "MIX") << "pre-opened descriptor";
    RecordProperty("pre_opened_fd", c);
    auto m = classify(readMapping(map_, kBytes), old_, fresh.substr(0, kBytes));
    EXPECT_NE(m, "MIX") << "old mapping";
    RecordProperty("old_mapping", m);
    // Whatever the old views did, new opens (and a new mapping) see the new bytes.
    EXPECT_EQ(classify(readFile(mnt_ + "/data.bin", 4096), old_, fresh), "new") << "second open";
    int fd = open((mnt_ + "/data.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    void* p = mmap(nullptr, fresh.size(), PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(std::memcmp(p, fresh.data(), fresh.size()), 0) << "a new mapping shows old bytes";
    munmap(p, fresh.size());
    close(fd);
  }
  int pre_ = -1;
  char* map_ = nullptr;
};

// PASS (5f, ctime only): the file is rewritten with the same size and its old
// mtime restored (touch -d back), so only ctime tells; after the age a fresh
// open returns exactly the new bytes and the old page-cache pages are gone
// (see expectNewVersion).
TEST_F(SourceChange5fTest, SameSizeSameMtimeNewCtimeGivesNewBytes) {
  holdOldVersion();
  struct stat before;
  ASSERT_EQ(stat(priv().c_str(), &before), 0);
  std::string fresh = randomBytes(kBytes, 503);
  rewriteSameSize(fresh);
  setMtime(kOldMtime);
  struct stat after;
  ASSERT_EQ(stat(priv().c_str(), &after), 0);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_FALSE(after.st_ctim.tv_sec == before.st_ctim.tv_sec &&
               after.st_ctim.tv_nsec == before.st_ctim.tv_nsec)
      << "ctime did not change";
  expectNewVersion(fresh);
}

// PASS (5f, renamed over): a new file of the same size with the old mtime is
// written next to it and rename()d over the old name (new inode, new ctime);
// after the age a fresh open returns exactly the new bytes, old views never
// mix.
TEST_F(SourceChange5fTest, RenamedOverGivesNewBytes) {
  holdOldVersion();
  std::string fresh = randomBytes(kBytes, 504);
  const std::string tmp = priv_ + "/.data.bin.tmp";
  writeFile(tmp, fresh);
  timespec ts[2] = {{kOldMtime, 0}, {kOldMtime, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), ts, 0), 0);
  ASSERT_EQ(rename(tmp.c_str(), priv().c_str()), 0);
  expectNewVersion(fresh);
}

// PASS (5f, extended): 5,000 bytes are appended (mtime restored too); after
// the age stat shows the new size and a fresh open returns exactly the old
// bytes followed by the appended ones; old views never mix.
TEST_F(SourceChange5fTest, ExtendedGivesNewSizeAndBytes) {
  holdOldVersion();
  std::string tail = randomBytes(5000, 505);
  int fd = open(priv().c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, tail.data(), tail.size()), static_cast<ssize_t>(tail.size()));
  close(fd);
  setMtime(kOldMtime);
  expectNewVersion(old_ + tail);
}

}  // namespace
}  // namespace epochfs::itest
