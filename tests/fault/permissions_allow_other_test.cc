// RELIABILITY.md case 15: "no way in" for other users of a shared node. With
// `-o allow_other` the kernel checks the source's modes for every user
// (`default_permissions`, forced by epochfs), also for a file that is hot in
// the page cache and the RAM tier; setuid bits and device nodes in the
// source are inert (the mount is nosuid,nodev); the cache files under
// --cache-dir are private to the daemon's user. Label `fault`. Runs as root;
// the other users are forked children that drop to their uid/gids.
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "fusefs/mount_table.h"
#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr uid_t kOwner = 1000;      // user A: owns the private files
constexpr uid_t kNobody = 65534;    // user B
constexpr uid_t kGroupMate = 1001;  // in A's group 1000, not A

// Runs `fn` in a forked child with the given credentials (all of real,
// effective and saved; supplementary groups exactly `groups`); returns what
// `fn` returned, or "child failed: ..." text.
std::string asUser(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                   const std::function<std::string()>& fn) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (setgroups(groups.size(), groups.data()) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(3);
    }
    std::string s = fn();
    for (size_t off = 0; off < s.size();) {
      ssize_t n = write(p[1], s.data() + off, s.size() - off);
      if (n <= 0) _exit(4);
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  auto st = waitForExit(pid, 60);
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    return "child failed: status " + std::to_string(st.value_or(-1));
  }
  return out;
}

// "OK <xxh3>" or "ERR <errno name>" for reading a whole file.
std::string readOutcome(const std::string& path) {
  auto r = readFile(path);
  if (r.err) return std::string("ERR ") + strerrorname_np(r.err);
  return "OK " + std::to_string(xxh3(r.data));
}

std::string statOutcome(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::string("ERR ") + strerrorname_np(errno);
  return "OK";
}

// Per-mount and super-block options of `mnt`, one comma-separated list.
std::string mountOptions(const std::string& mnt) {
  for (const fusefs::MountEntry& m : fusefs::MountTable::read()) {
    if (m.mountPoint == mnt) return m.mountOptions + "," + m.superOptions;
  }
  return "";
}

bool hasOption(const std::string& opts, const std::string& o) {
  return fusefs::MountTable::hasOption(opts, o);
}

class AllowOtherTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(chmod(root_.c_str(), 0755), 0);  // other users must reach the mountpoint
    private_ = randomBytes(300000, 15);
    public_ = randomBytes(70000, 16);
    owned("private.bin", private_, 0600);
    owned("public.bin", public_, 0644);
    owned("group.bin", randomBytes(5000, 17), 0640);
    mkdirs(src_ + "/privdir");
    owned("privdir/inside.bin", randomBytes(100, 18), 0644);
    ASSERT_EQ(chown((src_ + "/privdir").c_str(), kOwner, kOwner), 0);
    ASSERT_EQ(chmod((src_ + "/privdir").c_str(), 0700), 0);
  }
  void owned(const std::string& rel, const std::string& data, mode_t mode) {
    writeFile(src_ + "/" + rel, data, mode);
    ASSERT_EQ(chown((src_ + "/" + rel).c_str(), kOwner, kOwner), 0);
    ASSERT_EQ(chmod((src_ + "/" + rel).c_str(), mode), 0);
  }
  std::string m(const std::string& rel) const { return mnt_ + "/" + rel; }
  std::string private_, public_;
};

// PASS: the mount carries allow_other and default_permissions; A (uid 1000)
// and root read A's 0600 file, which is then resident in the page cache
// (mincore) and the RAM tier; right after, B (nobody) gets EACCES opening it
// (twice), EACCES on A's 0700 directory's contents and on the 0640 file, yet
// reads the 0644 file exactly; a member of A's group reads the 0640 file but
// not the 0600 one.
TEST_F(AllowOtherTest, OtherUserGetsEaccesOnPrivateFileEvenWhenCached) {
  auto r = mount({"-o", "allow_other", "--ram-cache", "64M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string opts = mountOptions(mnt_);
  EXPECT_TRUE(hasOption(opts, "allow_other")) << opts;
  EXPECT_TRUE(hasOption(opts, "default_permissions")) << opts;

  const std::string wantPrivate = "OK " + std::to_string(xxh3(private_));
  EXPECT_EQ(asUser(kOwner, kOwner, {}, [&] { return readOutcome(m("private.bin")); }), wantPrivate)
      << "the owner cannot read its own file";
  EXPECT_EQ(
      asUser(kOwner, kOwner, {}, [&] { return readOutcome(m("privdir/inside.bin")); }).substr(0, 2),
      "OK");
  EXPECT_EQ(readOutcome(m("private.bin")), wantPrivate) << "root";

  // The private bytes are hot: every page in the page cache, and in the RAM tier.
  int fd = open(m("private.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* p = mmap(nullptr, private_.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((private_.size() + page - 1) / page);
  ASSERT_EQ(mincore(p, private_.size(), vec.data()), 0);
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  EXPECT_EQ(resident, vec.size()) << "private.bin is not all in the page cache";
  munmap(p, private_.size());
  close(fd);
  auto s = stats();
  EXPECT_GE(counter(s, "tiers.ram.used_bytes").value_or(0), private_.size()) << s.dump();

  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return readOutcome(m("private.bin")); }),
              "ERR EACCES");
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return readOutcome(m("group.bin")); }),
              "ERR EACCES");
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return readOutcome(m("privdir/inside.bin")); }),
              "ERR EACCES");
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return statOutcome(m("privdir/inside.bin")); }),
              "ERR EACCES");
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return readOutcome(m("public.bin")); }),
              "OK " + std::to_string(xxh3(public_)));
    // The owner again, so the file is as hot as it gets before B's next try.
    EXPECT_EQ(asUser(kOwner, kOwner, {}, [&] { return readOutcome(m("private.bin")); }),
              wantPrivate);
  }
  EXPECT_EQ(asUser(kGroupMate, kGroupMate, {kOwner}, [&] { return readOutcome(m("group.bin")); })
                .substr(0, 2),
            "OK");
  EXPECT_EQ(asUser(kGroupMate, kGroupMate, {kOwner}, [&] { return readOutcome(m("private.bin")); }),
            "ERR EACCES");
}

// PASS: without allow_other, another user gets EACCES even on a 0644 file
// (FUSE's own rule), while root reads it.
TEST_F(AllowOtherTest, WithoutAllowOtherOtherUsersAreShutOut) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_FALSE(hasOption(mountOptions(mnt_), "allow_other"));
  EXPECT_EQ(readOutcome(m("public.bin")), "OK " + std::to_string(xxh3(public_)));
  EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return statOutcome(m("public.bin")); }),
            "ERR EACCES");
}

// PASS: a root-owned setuid+setgid copy of `id` in the source runs through the
// mount as nobody with euid and egid 65534 (not 0), and the mount says nosuid
// (mountinfo, statvfs). Control: the same file run from the source itself
// gives euid 0 where the source's filesystem honours setuid (else recorded).
TEST_F(AllowOtherTest, SetuidBinaryRunsWithoutPrivilege) {
  auto bin = readFile("/usr/bin/id");
  ASSERT_EQ(bin.err, 0);
  writeFile(src_ + "/suid-id", bin.data, 0755);
  ASSERT_EQ(chown((src_ + "/suid-id").c_str(), 0, 0), 0);
  ASSERT_EQ(chmod((src_ + "/suid-id").c_str(), 06755), 0);
  auto r = mount({"-o", "allow_other"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  struct stat st;
  ASSERT_EQ(stat(m("suid-id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 06755u) << "the mode bits themselves are shown as in the source";
  EXPECT_TRUE(hasOption(mountOptions(mnt_), "nosuid")) << mountOptions(mnt_);
  struct statvfs sv;
  ASSERT_EQ(statvfs(mnt_.c_str(), &sv), 0);
  EXPECT_TRUE(sv.f_flag & ST_NOSUID);

  // The control's outcome depends on the source's filesystem: recorded, not asserted.
  auto control = runProcess({src_ + "/suid-id", "-u"}, 30, SpawnOptions{Identity::kNobody, false});
  RecordProperty("euid_from_source", control.exitCode == 0 ? control.out : control.describe());
  for (const char* flag : {"-u", "-g"}) {
    auto viaMount = runProcess({m("suid-id"), flag}, 30, SpawnOptions{Identity::kNobody, false});
    ASSERT_EQ(viaMount.exitCode, 0) << viaMount.describe();
    EXPECT_EQ(viaMount.out, "65534\n") << "id " << flag << " through the mount";
  }
}

// PASS: character devices in the source (null 1:3, zero 1:5) appear through
// the mount as character devices with the same rdev, but opening them (for
// reading or writing) fails with EACCES for root and for nobody (nodev), and
// the mount says nodev.
// Control: the same nodes open in the source where its filesystem allows
// devices (recorded).
TEST_F(AllowOtherTest, DeviceNodesAreInert) {
  ASSERT_EQ(mknod((src_ + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(mknod((src_ + "/zero").c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
  auto r = mount({"-o", "allow_other"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(hasOption(mountOptions(mnt_), "nodev")) << mountOptions(mnt_);
  struct statvfs sv;
  ASSERT_EQ(statvfs(mnt_.c_str(), &sv), 0);
  EXPECT_TRUE(sv.f_flag & ST_NODEV);
  for (const char* n : {"null", "zero"}) {
    SCOPED_TRACE(n);
    struct stat st, want;
    ASSERT_EQ(stat((src_ + "/" + n).c_str(), &want), 0);
    ASSERT_EQ(stat(m(n).c_str(), &st), 0) << strerror(errno);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, want.st_rdev);
    auto openErr = [](const std::string& p, int flags) {
      int fd = open(p.c_str(), flags | O_CLOEXEC);
      if (fd >= 0) close(fd);
      return fd >= 0 ? std::string("opened") : std::string(strerrorname_np(errno));
    };
    EXPECT_EQ(openErr(m(n), O_RDONLY), "EACCES") << "root";
    EXPECT_EQ(openErr(m(n), O_WRONLY), "EACCES") << "root, for writing";
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return openErr(m(n), O_RDONLY); }), "EACCES");
    RecordProperty(std::string("open_in_source_") + n, openErr(src_ + "/" + n, O_RDONLY));
  }
}

// PASS: after the daemon cached every file (A's private one included) in its
// disk tier, every directory under --cache-dir that epochfs made is 0700 and
// every file in it 0600 (no group/other bits), all owned by the daemon's
// uid/gid, nobody cannot open a segment file, and the files hold at least the
// dataset's bytes (so the check saw the real cache).
TEST_F(AllowOtherTest, CacheFilesArePrivateToTheDaemonUser) {
  auto r = mount(
      {"-o", "allow_other", "--cache-dir", cache_, "--ram-cache", "1M", "--disk-cache", "64M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (const auto& rel : regularFiles(src_)) EXPECT_EQ(readFile(m(rel)).err, 0) << rel;
  const pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  struct stat ds;
  ASSERT_EQ(stat(("/proc/" + std::to_string(pid)).c_str(), &ds), 0);  // the daemon's euid/egid
  auto check = [&](const std::string& when) {
    SCOPED_TRACE(when);
    uint64_t bytes = 0;
    size_t files = 0, dirs = 0;
    std::string segment;
    for (const auto& [rel, e] : snapshotTree(cache_, false)) {
      if (rel == ".") continue;  // made by the test
      SCOPED_TRACE(rel);
      EXPECT_EQ(e.uid, ds.st_uid);
      EXPECT_EQ(e.gid, ds.st_gid);
      if (S_ISDIR(e.mode)) {
        EXPECT_EQ(e.mode & 07777, 0700u) << std::oct << e.mode;
        ++dirs;
      } else {
        EXPECT_TRUE(S_ISREG(e.mode)) << "not a regular file: " << std::oct << e.mode;
        EXPECT_EQ(e.mode & 07777, 0600u) << std::oct << e.mode;
        bytes += static_cast<uint64_t>(e.size);
        ++files;
        if (rel.find("seg-") != std::string::npos) segment = cache_ + "/" + rel;
      }
    }
    EXPECT_GE(dirs, 1u);
    EXPECT_GE(files, 1u);
    EXPECT_GE(bytes, treeBytes(src_)) << "the disk tier does not hold the dataset";
    ASSERT_FALSE(segment.empty());
    EXPECT_EQ(asUser(kNobody, kNobody, {}, [&] { return readOutcome(segment); }), "ERR EACCES");
    RecordProperty("cache_files_" + when, std::to_string(files));
  };
  // Cached chunks reach the disk tier in the background: wait until they are all there.
  for (int i = 0; i < 100; ++i) {
    auto s = stats();
    if (counter(s, "tiers.disk.used_bytes").value_or(0) >= treeBytes(src_)) break;
    usleep(100000);
  }
  check("mounted");
  ASSERT_TRUE(unmount());
  check("unmounted");
}

}  // namespace
}  // namespace epochfs::itest
