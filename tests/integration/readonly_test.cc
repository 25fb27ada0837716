// (b) The mount is read-only: every mutating call fails with EROFS and the
// source is left exactly as it was; readdir shows nothing the source lacks.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <set>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

class ReadOnlyTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    mkdirs(src_ + "/dir/sub");
    mkdirs(src_ + "/emptydir");
    writeFile(src_ + "/file.bin", randomBytes(10000, 1));
    writeFile(src_ + "/dir/inner.txt", "hello\n");
    ASSERT_EQ(symlink("file.bin", (src_ + "/link").c_str()), 0);
  }
};

std::set<std::string> names(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    ADD_FAILURE() << "opendir " << dir << ": " << strerror(errno);
    return out;
  }
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  closedir(d);
  return out;
}

TEST_F(ReadOnlyTest, EveryMutationFailsWithErofs) {
  Tree before = snapshotTree(src_, true);
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string m = mnt_;
  const std::string f = m + "/file.bin";

  auto openErr = [](const std::string& p, int flags) {
    int fd = open(p.c_str(), flags | O_CLOEXEC, 0644);
    if (fd >= 0) {
      close(fd);
      return 0;
    }
    return errno;
  };
  auto err = [](int rc) { return rc == 0 ? 0 : errno; };
  timespec times[2] = {{1, 0}, {2, 0}};

  struct Op {
    const char* what;
    std::function<int()> run;  // returns errno (0 = succeeded)
  };
  std::vector<Op> ops = {
      {"open O_WRONLY", [&] { return openErr(f, O_WRONLY); }},
      {"open O_RDWR", [&] { return openErr(f, O_RDWR); }},
      {"open O_WRONLY|O_APPEND", [&] { return openErr(f, O_WRONLY | O_APPEND); }},
      {"open O_RDONLY|O_TRUNC", [&] { return openErr(f, O_RDONLY | O_TRUNC); }},
      {"open O_CREAT new", [&] { return openErr(m + "/new.txt", O_WRONLY | O_CREAT); }},
      {"open O_CREAT|O_EXCL new", [&] { return openErr(m + "/new2", O_RDWR | O_CREAT | O_EXCL); }},
      {"open O_CREAT existing", [&] { return openErr(f, O_WRONLY | O_CREAT); }},
      {"open O_TMPFILE", [&] { return openErr(m + "/dir", O_TMPFILE | O_RDWR); }},
      {"mkdir", [&] { return err(mkdir((m + "/newdir").c_str(), 0755)); }},
      {"rmdir", [&] { return err(rmdir((m + "/emptydir").c_str())); }},
      {"unlink", [&] { return err(unlink(f.c_str())); }},
      {"unlink symlink", [&] { return err(unlink((m + "/link").c_str())); }},
      {"rename", [&] { return err(rename(f.c_str(), (m + "/renamed").c_str())); }},
      {"rename dir", [&] { return err(rename((m + "/dir").c_str(), (m + "/dir2").c_str())); }},
      {"rename over", [&] { return err(rename((m + "/dir/inner.txt").c_str(), f.c_str())); }},
      {"symlink", [&] { return err(symlink("file.bin", (m + "/newlink").c_str())); }},
      {"link", [&] { return err(link(f.c_str(), (m + "/hardlink").c_str())); }},
      {"chmod", [&] { return err(chmod(f.c_str(), 0600)); }},
      {"chmod root", [&] { return err(chmod(m.c_str(), 0700)); }},
      {"chown", [&] { return err(chown(f.c_str(), 1, 1)); }},
      {"lchown symlink", [&] { return err(lchown((m + "/link").c_str(), 1, 1)); }},
      {"truncate", [&] { return err(truncate(f.c_str(), 0)); }},
      {"truncate grow", [&] { return err(truncate(f.c_str(), 1 << 20)); }},
      {"utimensat times", [&] { return err(utimensat(AT_FDCWD, f.c_str(), times, 0)); }},
      {"utimensat now", [&] { return err(utimensat(AT_FDCWD, f.c_str(), nullptr, 0)); }},
      {"setxattr", [&] { return err(setxattr(f.c_str(), "user.x", "1", 1, 0)); }},
      {"setxattr root", [&] { return err(setxattr(m.c_str(), "user.epochfs.admin", "/x", 2, 0)); }},
      {"removexattr", [&] { return err(removexattr(m.c_str(), "user.epochfs.admin")); }},
      {"mknod fifo", [&] { return err(mknod((m + "/fifo").c_str(), S_IFIFO | 0644, 0)); }},
      {"mknod file", [&] { return err(mknod((m + "/regular").c_str(), S_IFREG | 0644, 0)); }},
  };
  for (const auto& op : ops) {
    int e = op.run();
    EXPECT_EQ(e, EROFS) << op.what << " gave " << (e ? strerror(e) : "success");
  }
  // The kernel must not have cached anything the failed calls tried to make.
  struct stat st;
  for (const char* n : {"new.txt", "new2", "newdir", "renamed", "newlink", "hardlink", "fifo"}) {
    EXPECT_NE(lstat((m + "/" + n).c_str(), &st), 0) << n << " appeared on the mount";
  }
  ASSERT_EQ(stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 10000);

  // Writable fds cannot be had, but a read-only fd must still refuse writes.
  int fd = open(f.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_NE(fallocate(fd, 0, 0, 4096), 0);
  close(fd);

  ASSERT_TRUE(unmount());
  Tree after = snapshotTree(src_, true);
  ASSERT_EQ(before.size(), after.size()) << "entries added to / removed from the source";
  for (const auto& [rel, b] : before) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << rel << " vanished from the source";
    const Entry& a = it->second;
    EXPECT_EQ(a.mode, b.mode) << rel;
    EXPECT_EQ(a.uid, b.uid) << rel;
    EXPECT_EQ(a.size, b.size) << rel;
    EXPECT_EQ(a.mtimeNs, b.mtimeNs) << rel;
    EXPECT_EQ(a.hash, b.hash) << rel;
    EXPECT_EQ(a.target, b.target) << rel;
  }
}

TEST_F(ReadOnlyTest, StatvfsAndMountFlagsSayReadOnly) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(access(mnt_.c_str(), W_OK), -1) << "access(W_OK) on the mount root succeeded";
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(access((mnt_ + "/file.bin").c_str(), R_OK), 0);
}

TEST_F(ReadOnlyTest, ReaddirShowsNothingExtra) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(names(mnt_), names(src_)) << "mount root listing differs from the source";
  EXPECT_EQ(names(mnt_ + "/dir"), names(src_ + "/dir"));
  EXPECT_TRUE(names(mnt_ + "/emptydir").empty());
  // The admin socket is found through the xattr, not a file in the tree.
  std::string why;
  EXPECT_FALSE(adminSocketPath(mnt_, &why).empty()) << why;
  auto s = admin("status");
  EXPECT_EQ(s.value("ok", false), true) << s.dump();
}

}  // namespace
}  // namespace epochfs::itest
