// (i) Source changes after the mount. With --revalidate 1 a changed file is
// seen by a fresh open+read after the interval; by default the metadata
// snapshot taken at mount time stays in force.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr time_t kOldMtime = 1600000000;
constexpr time_t kNewMtime = 1600000500;

class RevalidateTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    old_ = randomBytes(10000, 100);
    writeFile(path(), old_);
    setMtime(kOldMtime);
  }
  std::string path() const { return src_ + "/data.bin"; }
  void setMtime(time_t t) {
    timespec ts[2] = {{t, 0}, {t, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path().c_str(), ts, 0), 0);
  }
  // Rewrites the source file in place (no truncation when sizes match).
  void rewrite(const std::string& data) {
    int fd = open(path().c_str(), O_WRONLY | (data.size() == old_.size() ? 0 : O_TRUNC));
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    close(fd);
    setMtime(kNewMtime);
  }
  static void wait(double s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(s * 1000)));
  }
  std::string old_;
};

TEST_F(RevalidateTest, SameSizeNewContentSeenAfterInterval) {
  auto r = mount({"--revalidate", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_TRUE(readFile(mnt_ + "/data.bin").data == old_);
  std::string fresh = randomBytes(old_.size(), 101);
  rewrite(fresh);
  wait(1.5);
  // No page-cache drop: the daemon must make the kernel forget the old pages.
  auto got = readFile(mnt_ + "/data.bin");
  ASSERT_EQ(got.err, 0) << strerror(got.err);
  EXPECT_TRUE(got.data == fresh) << (got.data == old_ ? "still the old bytes"
                                                      : "neither old nor new bytes");
  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/data.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, kNewMtime);
}

TEST_F(RevalidateTest, GrownFileSeenAfterInterval) {
  auto r = mount({"--revalidate", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_TRUE(readFile(mnt_ + "/data.bin").data == old_);
  std::string grown = randomBytes(old_.size() * 2 + 3, 102);
  rewrite(grown);
  wait(1.5);
  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/data.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(grown.size()));
  auto got = readFile(mnt_ + "/data.bin");
  ASSERT_EQ(got.err, 0) << strerror(got.err);
  EXPECT_EQ(got.data.size(), grown.size());
  EXPECT_TRUE(got.data == grown);
}

// Without --revalidate the mount-time snapshot wins: size and mtime stay the
// snapshot's, and the bytes already cached keep being served. Observed (first
// daemon, with the file grown to twice its size and the page cache dropped):
// stat shows the old size and mtime, read() returns the old bytes from the
// RAM tier ("observed" property = "old bytes (from the cache)"). A chunk that
// was never cached would come from the changed source, cut at the old size.
TEST_F(RevalidateTest, DefaultKeepsTheSnapshot) {
  auto r = mount({"--ram-cache", "64M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_TRUE(readFile(mnt_ + "/data.bin").data == old_);  // now in the RAM tier
  std::string grown = randomBytes(old_.size() * 2, 103);
  rewrite(grown);
  wait(1.5);
  dropCaches();
  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/data.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(old_.size())) << "snapshot size not kept";
  EXPECT_EQ(st.st_mtim.tv_sec, kOldMtime) << "snapshot mtime not kept";
  auto got = readFile(mnt_ + "/data.bin");
  std::string observed = got.err            ? std::string("error ") + strerror(got.err)
                         : got.data == old_ ? "old bytes (from the cache)"
                         : got.data == grown.substr(0, old_.size())
                             ? "new bytes cut at the old size (from the source)"
                             : "other (" + std::to_string(got.data.size()) + " bytes)";
  RecordProperty("observed", observed);
  EXPECT_EQ(got.data.size(), old_.size()) << observed;
  EXPECT_TRUE(got.data == old_) << "cached chunk of the snapshot not served: " << observed;
}

}  // namespace
}  // namespace epochfs::itest
