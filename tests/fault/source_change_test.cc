// Issue 7 case 5 (part): the source changes beneath another layer. The
// daemon's source is a bindfs mount of a private directory and every change is
// made in the private directory, so the daemon cannot learn of it by inotify on
// its source path (as on NFS or Lustre). Mounted with --revalidate 1.
// Label `fault`. Same-size-new-mtime and growth through the plain source are
// in tests/integration/revalidate_test.cc.
#include <fcntl.h>
#include <sys/stat.h>
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

}  // namespace
}  // namespace epochfs::itest
