// (h) The command line: bad input is refused quickly with exactly one
// "epochfs: ..." line and leaves nothing mounted; fstab-style generic options
// are accepted; signals unmount cleanly; -f stays in the foreground.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

constexpr double kCliTimeout = 10;  // every refusal must come back within this

class CliTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    writeFile(src_ + "/a.bin", randomBytes(1234, 1));
  }

  // Runs epochfs with a full argv (after the binary) and checks the refusal.
  void expectRefused(const std::vector<std::string>& args,
                     const std::vector<std::string>& reasonAnyOf) {
    std::vector<std::string> argv = {epochfsBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcResult r = runProcess(argv, kCliTimeout);
    EXPECT_FALSE(r.timedOut) << "epochfs did not return within " << kCliTimeout << " s";
    EXPECT_NE(r.exitCode, 0) << r.describe();
    EXPECT_TRUE(oneEpochfsLine(r, reasonAnyOf));
    EXPECT_TRUE(r.out.empty()) << "stdout: " << r.out;
    expectNothingLeft();
  }

  void expectNothingLeft() {
    auto mounts = mountPointsUnder(root_);
    EXPECT_TRUE(mounts.empty()) << "left mounted: " << mounts.front();
    for (const auto& m : mounts) unmountPath(m);
    // A daemon that forked before failing would be re-parented to us.
    auto t0 = std::chrono::steady_clock::now();
    std::vector<pid_t> kids;
    while (!(kids = liveChildren()).empty() &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(kids.empty()) << "a process (pid " << kids.front() << ") outlived the refusal";
  }
};

TEST_F(CliTest, MissingSource) { expectRefused({root_ + "/nope", mnt_}, {"nope", "source"}); }

TEST_F(CliTest, SourceIsARegularFile) {
  expectRefused({src_ + "/a.bin", mnt_}, {"director", "a.bin"});
}

TEST_F(CliTest, MissingMountpoint) {
  expectRefused({src_, root_ + "/nomnt"}, {"nomnt", "mountpoint", "mount point"});
}

TEST_F(CliTest, MountpointIsARegularFile) {
  writeFile(root_ + "/file-mnt", "x");
  expectRefused({src_, root_ + "/file-mnt"}, {"director", "file-mnt", "mountpoint"});
}

TEST_F(CliTest, MissingArguments) {
  expectRefused({}, {"source", "mountpoint", "required", "usage", "argument"});
  expectRefused({src_}, {"mountpoint", "required", "usage", "argument"});
}

TEST_F(CliTest, NonEmptyMountpointRefusedUnlessNonempty) {
  writeFile(mnt_ + "/existing.txt", "keep me");
  expectRefused({src_, mnt_}, {"empty"});
  auto r = mount({"-o", "nonempty"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(readFile(mnt_ + "/a.bin").data, readFile(src_ + "/a.bin").data);
  struct stat st;
  EXPECT_NE(lstat((mnt_ + "/existing.txt").c_str(), &st), 0) << "the mount does not cover MNT";
  ASSERT_TRUE(unmount());
  EXPECT_EQ(readFile(mnt_ + "/existing.txt").data, "keep me");
}

TEST_F(CliTest, AlreadyMountedMountpoint) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  r = runProcess({epochfsBinary(), src_, mnt_}, kCliTimeout);
  EXPECT_FALSE(r.timedOut);
  EXPECT_NE(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(oneEpochfsLine(r, {"mount", "empty"}));
  EXPECT_EQ(mountPointsUnder(mnt_).size(), 1u) << "stacked a second mount";
  EXPECT_EQ(readFile(mnt_ + "/a.bin").data, readFile(src_ + "/a.bin").data)
      << "the first mount broke";
}

// With an empty source the mounted directory looks empty, so only a real
// "already mounted" check can refuse the second mount.
TEST_F(CliTest, AlreadyMountedEvenWithEmptySourceAndNonempty) {
  mkdirs(root_ + "/emptysrc");
  auto r = mountAt(root_ + "/emptysrc", mnt_, {});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  r = runProcess({epochfsBinary(), src_, mnt_, "-o", "nonempty"}, kCliTimeout);
  EXPECT_FALSE(r.timedOut);
  EXPECT_NE(r.exitCode, 0) << "mounted twice on " << mnt_ << ": " << r.describe();
  EXPECT_TRUE(oneEpochfsLine(r, {"mount"}));
  EXPECT_EQ(mountPointsUnder(mnt_).size(), 1u) << "stacked a second mount";
}

TEST_F(CliTest, UnknownLongOption) { expectRefused({src_, mnt_, "--bogus"}, {"bogus"}); }

TEST_F(CliTest, UnknownDashOOption) { expectRefused({src_, mnt_, "-o", "bogus=1"}, {"bogus"}); }

TEST_F(CliTest, MalformedSize) {
  expectRefused({src_, mnt_, "--ram-cache", "12Q"}, {"12Q"});
  expectRefused({src_, mnt_, "-o", "ram_cache=12Q"}, {"12Q"});
  expectRefused({src_, mnt_, "--ram-cache", "-5M"}, {"-5M", "ram"});
}

TEST_F(CliTest, BadCacheDir) {
  writeFile(root_ + "/notadir", "x");
  expectRefused({src_, mnt_, "--cache-dir", root_ + "/notadir"}, {"notadir", "cache"});
}

TEST_F(CliTest, FstabGenericOptionsAccepted) {
  auto r =
      mount({"-o", "rw,suid,dev,exec,auto,nouser,defaults,_netdev,x-systemd.foo,ram_cache=64M"},
            kCliTimeout);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_LT(r.seconds, kCliTimeout);
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
  auto s = stats();
  EXPECT_EQ(counter(s, "tiers.ram.capacity_bytes").value_or(0), 64u << 20)
      << "ram_cache=64M not applied: " << s.dump();
  EXPECT_EQ(readFile(mnt_ + "/a.bin").data, readFile(src_ + "/a.bin").data);
}

// `out=$(epochfs SRC MNT)` and subprocess.run(capture_output=True) wait for
// EOF on stdout/stderr: the daemon must not keep the caller's pipes open.
TEST_F(CliTest, DaemonReleasesCallersStdio) {
  auto r = mountAt(src_, mnt_, {}, 30, SpawnOptions{Identity::kSelf, /*pipeStdio=*/true});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_FALSE(r.stdioHeldOpen) << "the daemon kept the caller's stdout/stderr pipes open";
}

TEST_F(CliTest, SigtermUnmountsCleanly) {
  auto r = mount();
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_TRUE(waitMounted(mnt_, false, 5)) << "still mounted 5 s after SIGTERM";
  auto st = waitForExit(pid, 5);
  ASSERT_TRUE(st.has_value()) << "daemon still running 5 s after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "wait status " << *st;
}

TEST_F(CliTest, ForegroundModeAndSigint) {
  std::string log = root_ + "/fg.log";
  pid_t pid = spawnBackground({epochfsBinary(), src_, mnt_, "-f"}, log);
  ASSERT_GT(pid, 0);
  bool up = waitMounted(mnt_, true, 20);
  if (!up) {
    kill(pid, SIGKILL);
    waitForExit(pid, 5);
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    FAIL() << "-f: not mounted within 20 s; output: " << text;
  }
  EXPECT_FALSE(waitForExit(pid, 0.5).has_value()) << "-f returned instead of staying";
  // With -f the process itself stays: it serves the mount (--no-supervisor)
  // or is the supervisor whose child serves it (the default).
  const pid_t server = daemonPid();
  std::ifstream stat("/proc/" + std::to_string(server) + "/stat");
  std::string fields((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  int serverParent = -1;
  const size_t paren = fields.rfind(')');
  if (paren != std::string::npos) std::sscanf(fields.c_str() + paren + 1, " %*c %d", &serverParent);
  EXPECT_TRUE(server == pid || serverParent == pid)
      << "with -f the process itself serves the mount or supervises its server";
  EXPECT_EQ(readFile(mnt_ + "/a.bin").data, readFile(src_ + "/a.bin").data);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_TRUE(waitMounted(mnt_, false, 5)) << "still mounted 5 s after SIGINT";
  auto st = waitForExit(pid, 5);
  if (!st) {
    kill(pid, SIGKILL);
    waitForExit(pid, 5);
    FAIL() << "foreground daemon still running 5 s after SIGINT";
  }
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "wait status " << *st;
}

TEST_F(CliTest, HelpListsOptions) {
  auto r = runProcess({epochfsBinary(), "--help"}, kCliTimeout);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  for (const char* o : {"--ram-cache", "--cache-dir", "--foreground", "--revalidate"}) {
    EXPECT_NE(r.out.find(o), std::string::npos) << "--help does not list " << o;
  }
  expectNothingLeft();
}

}  // namespace
}  // namespace epochfs::itest
