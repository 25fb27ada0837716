// Two jobs' mounts of one dataset in one shared daemon (docs/ADMIN.md "One
// daemon, several mounts"): each mount has its own admin socket, its own
// orders (a job's rank 0 never replaces another's; one job's reads never
// advance another's plan) and its own owner (--owner), who may steer that
// mount and nothing else. Real mounts (tests/integration/mount_fixture.h),
// epochctl run as two unprivileged uids (SO_PEERCRED decides, no passwd
// entry needed). Each test states its pass criterion above it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "fusefs/admin_protocol.h"
#include "tests/integration/admin_test_util.h"
#include "tests/integration/mount_fixture.h"

// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3.
#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {
namespace {

constexpr uid_t kUserA = 2001;  // job A's user
constexpr uid_t kUserB = 2002;  // job B's user
constexpr int kExitDenied = 4;  // epochctl: permission denied

class SharedMountOwnersTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The users reach the mounts and read the order files through the test's directory.
    chmod(root_.c_str(), 0755);
    for (int d = 0; d < 2; ++d) {
      mkdirs(src_ + "/c" + std::to_string(d));
      for (int i = 0; i < 20; ++i) {
        const std::string rel = "c" + std::to_string(d) + "/f" + std::to_string(i) + ".bin";
        files_.push_back(rel);
        writeFile(src_ + "/" + rel, randomBytes(150 * 1000 + 17 * i, 31 * d + i));
      }
    }
  }

  // An order file of every file in a shuffled order (seed), readable by all.
  std::string orderFile(const std::string& name, uint64_t seed) {
    std::vector<std::string> order = files_;
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    const std::string path = root_ + "/" + name;
    std::ofstream out(path);
    for (const auto& f : order) out << f << "\n";
    chmod(path.c_str(), 0644);
    return path;
  }

  static Creds as(uid_t uid) { return Creds{uid, uid, {}}; }

  // The registered orders of the mount whose socket `mnt` advertises.
  size_t plans(const std::string& mnt) {
    return adminRequest(mnt, {{"cmd", admin::kCmdPlans}})
        .value("plans", nlohmann::json::array())
        .size();
  }

  // Stream rows of the daemon's stats for `job`.
  std::vector<nlohmann::json> streamsOf(uint32_t job) {
    std::vector<nlohmann::json> out;
    const auto st = stats();
    for (const auto& row : st["prefetch"].value("streams", nlohmann::json::array())) {
      if (row.value("job", 0u) == job) out.push_back(row);
    }
    return out;
  }

  std::vector<std::string> files_;
};

// Pass: mount A (--owner 2001) and mount B (--owner 2002, joined: the same
// daemon pid, another admin socket). Each user registers rank 0 of its own
// order on its own mount: both plans stay (one each). Reading 10 files of A's
// order through A advances A's stream only (B's stays at 0) and counts in A's
// `stats` mount section only. User 2002 is
// refused (exit 4) clearing A's order, unmounting A, warming A, evicting
// the shared cache and refreshing what every mount sees; user 2001 clears A's order (B's stays);
// user 2002 unmounts B (A still served, the same daemon).
TEST_F(SharedMountOwnersTest, EachMountHasItsOwnOrdersAndOwner) {
  auto r = mount({"--allow-other", "--owner", std::to_string(kUserA)});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string mntB = root_ + "/mntB";
  mkdirs(mntB);
  r = mountAt(src_, mntB, {"--allow-other", "--owner", std::to_string(kUserB)});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const pid_t pid = daemonPid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(daemonPid(mntB), pid) << "B did not join A's daemon";
  EXPECT_NE(adminSocketPath(mnt_), adminSocketPath(mntB)) << "one socket for two mounts";

  const std::string orderA = orderFile("order-a", 1), orderB = orderFile("order-b", 2);
  r = runCtl({"order", mnt_, orderA}, 60, as(kUserA));
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  r = runCtl({"order", mntB, orderB}, 60, as(kUserB));
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(plans(mnt_), 1u);
  EXPECT_EQ(plans(mntB), 1u) << "B's rank 0 replaced A's, or the other way";

  // Reads through A advance A's plan, never B's.
  std::ifstream in(orderA);
  std::string rel;
  for (int i = 0; i < 10 && std::getline(in, rel); ++i) {
    ASSERT_EQ(readFile(mnt_ + "/" + rel).err, 0) << rel;
  }
  const auto a = streamsOf(0);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_GE(a[0].value("position", 0u), 10u);
  const auto b = streamsOf(1);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].value("position", 1u), 0u) << "A's reads advanced B's plan";
  // Each mount's stats count its own readers.
  EXPECT_GE(counter(stats(), "mount.read_requests").value_or(0), 10u);
  EXPECT_EQ(counter(stats(mntB), "mount.read_requests").value_or(1), 0u);

  // B's user may not steer A's mount, nor the shared cache.
  for (const auto& args : std::vector<std::vector<std::string>>{{"order", mnt_, "--clear"},
                                                                {"unmount", mnt_},
                                                                {"warm", mnt_, files_[0]},
                                                                {"evict", mntB, "--all"},
                                                                {"refresh", mntB}}) {
    r = runCtl(args, 60, as(kUserB));
    EXPECT_EQ(r.exitCode, kExitDenied) << args[0] << " " << args[1] << ": " << r.describe();
  }
  EXPECT_TRUE(isMounted(mnt_));
  EXPECT_EQ(plans(mnt_), 1u);

  // A's user clears A's orders only.
  r = runCtl({"order", mnt_, "--clear"}, 60, as(kUserA));
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(plans(mnt_), 0u);
  EXPECT_EQ(plans(mntB), 1u);

  // B's user unmounts B; A is served on by the same daemon.
  r = runCtl({"unmount", mntB}, 60, as(kUserB));
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(waitMounted(mntB, false, 10)) << "B still mounted";
  EXPECT_EQ(daemonPid(), pid);
  EXPECT_EQ(readFile(mnt_ + "/" + files_[3]).err, 0);
}

}  // namespace
}  // namespace epochfs::itest
