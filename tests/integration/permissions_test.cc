// (g) A source file the daemon may not read: reading it through the mount
// fails with EACCES, the other files stay readable.
//
// The daemon runs without the power to bypass file modes, either as `nobody`
// (needs a non-root mount: /dev/fuse usable by uid 65534, since libfuse opens
// it itself before falling back to fusermount3) or, where that is impossible,
// as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH, which makes
// mode-000 files unreadable for it all the same.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

class PermissionsTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
    mkdirs(src_ + "/cls");
    public_ = randomBytes(50000, 3);
    writeFile(src_ + "/public.bin", public_, 0644);
    writeFile(src_ + "/cls/also_public.bin", public_.substr(0, 999), 0644);
    writeFile(src_ + "/secret.bin", randomBytes(4000, 4), 0000);
  }
  std::string public_;
};

// Reads `rels` under mnt as uid 65534 in a forked child; returns
// "rel errno size" lines.
std::string readAsNobody(const std::string& mnt, const std::vector<std::string>& rels) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    std::ostringstream os;
    for (const auto& rel : rels) {
      auto r = readFile(mnt + "/" + rel);
      os << rel << ' ' << r.err << ' ' << r.data.size() << ' ' << xxh3(r.data) << '\n';
    }
    std::string s = os.str();
    ssize_t ignored = write(p[1], s.data(), s.size());
    (void)ignored;
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  waitForExit(pid, 30);
  return out;
}

struct Outcome {
  int err = -1;
  size_t size = 0;
  uint64_t hash = 0;
};

std::map<std::string, Outcome> parse(const std::string& s) {
  std::map<std::string, Outcome> out;
  std::istringstream in(s);
  std::string rel;
  Outcome o;
  while (in >> rel >> o.err >> o.size >> o.hash) out[rel] = o;
  return out;
}

TEST_F(PermissionsTest, UnreadableSourceFileAsNobody) {
  // Can uid 65534 mount at all here?
  auto probe = runProcess({"/bin/sh", "-c", "exec 3<>/dev/fuse"}, 10,
                          SpawnOptions{Identity::kNobody, false});
  if (probe.exitCode != 0) {
    GTEST_SKIP() << "uid 65534 cannot open /dev/fuse here (libfuse needs it before falling "
                    "back to fusermount3), so a daemon running as nobody cannot mount; "
                    "UnreadableSourceFileWithoutDacCaps covers the same behaviour";
  }
  ASSERT_EQ(chown(mnt_.c_str(), 65534, 65534), 0);
  auto r = mountAt(src_, mnt_, {}, 60, SpawnOptions{Identity::kNobody, false});
  ASSERT_EQ(r.exitCode, 0) << "mount as nobody: " << r.describe();
  // Without allow_other only the mounting user may use the mount.
  auto got = parse(readAsNobody(mnt_, {"public.bin", "cls/also_public.bin", "secret.bin"}));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got["public.bin"].err, 0);
  EXPECT_EQ(got["public.bin"].hash, xxh3(public_));
  EXPECT_EQ(got["cls/also_public.bin"].err, 0);
  EXPECT_EQ(got["cls/also_public.bin"].size, 999u);
  EXPECT_EQ(got["secret.bin"].err, EACCES)
      << "reading a mode-000 file as nobody gave " << strerror(got["secret.bin"].err);
  EXPECT_EQ(got["secret.bin"].size, 0u) << "bytes of an unreadable file were served";
  EXPECT_TRUE(unmount());
}

bool hasDacCaps(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
      return caps & 0x6;  // CAP_DAC_OVERRIDE | CAP_DAC_READ_SEARCH
    }
  }
  return true;
}

TEST_F(PermissionsTest, UnreadableSourceFileWithoutDacCaps) {
  auto r = mountAt(src_, mnt_, {}, 60, SpawnOptions{Identity::kRootWithoutDac, false});
  ASSERT_EQ(r.exitCode, 0) << "mount as root without CAP_DAC_*: " << r.describe();
  pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(hasDacCaps(pid)) << "the daemon still holds CAP_DAC_OVERRIDE; test is void";

  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/secret.bin").c_str(), &st), 0) << "metadata stays visible";
  EXPECT_EQ(st.st_mode & 07777, 0u);
  EXPECT_EQ(st.st_size, 4000);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto secret = readFile(mnt_ + "/secret.bin");
    EXPECT_EQ(secret.err, EACCES) << "attempt " << attempt << ": "
                                  << (secret.err ? strerror(secret.err) : "read succeeded");
    EXPECT_TRUE(secret.data.empty()) << "bytes of an unreadable file were served";
  }
  auto pub = readFile(mnt_ + "/public.bin");
  EXPECT_EQ(pub.err, 0);
  EXPECT_TRUE(pub.data == public_);
  EXPECT_EQ(readFile(mnt_ + "/cls/also_public.bin").data, public_.substr(0, 999));
  auto s = stats();
  EXPECT_GE(counter(s, "source_errors").value_or(0), 1u) << s.dump();
  EXPECT_TRUE(unmount());
}

}  // namespace
}  // namespace epochfs::itest
