// fusefs/memory_limit: the effective memory limit from fake /proc and cgroup
// files (v1, v2, hybrid, nested limits, "max", v1's unlimited value, cgroup
// namespaces), and the defaults derived from it.
#include "fusefs/daemon/memory_limit.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace epochfs::fusefs {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// A fake root: proc/self/{cgroup,mountinfo}, proc/meminfo, and cgroup trees
// under sys/ that the fake mountinfo names by their real (temp) paths.
class FakeCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/epochfs-memlimit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/proc/self");
    paths_.procSelfCgroup = root_ + "/proc/self/cgroup";
    paths_.procSelfMountinfo = root_ + "/proc/self/mountinfo";
    paths_.procMeminfo = root_ + "/proc/meminfo";
    write(paths_.procMeminfo, "MemTotal:       16384000 kB\nMemFree:         1000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  std::string v1Mount() const { return root_ + "/sys/fs/cgroup/memory"; }
  std::string v2Mount() const { return root_ + "/sys/fs/cgroup/unified"; }
  std::string v1Line(const std::string& mountRoot = "/") const {
    return "35 31 0:32 " + mountRoot + " " + v1Mount() +
           " rw,relatime shared:9 - cgroup cgroup rw,memory\n";
  }
  std::string v2Line(const std::string& mountRoot = "/") const {
    return "40 31 0:36 " + mountRoot + " " + v2Mount() + " rw,relatime - cgroup2 cgroup2 rw\n";
  }
  static constexpr uint64_t kMemTotal = uint64_t{16384000} * 1024;

  std::string root_;
  MemoryLimitPaths paths_;
};

// Pass: the values that mean "no limit" parse as 0, byte counts as themselves.
TEST(CgroupLimitValue, MaxUnlimitedAndMalformedMeanNoLimit) {
  EXPECT_EQ(parseCgroupLimitValue("max"), 0u);
  EXPECT_EQ(parseCgroupLimitValue("9223372036854771712"), 0u);  // v1 unlimited
  EXPECT_EQ(parseCgroupLimitValue("18446744073709551615"), 0u);
  EXPECT_EQ(parseCgroupLimitValue("99999999999999999999999"), 0u);
  EXPECT_EQ(parseCgroupLimitValue(""), 0u);
  EXPECT_EQ(parseCgroupLimitValue("-5"), 0u);
  EXPECT_EQ(parseCgroupLimitValue("12ab"), 0u);
  EXPECT_EQ(parseCgroupLimitValue("268435456"), 256 * kMiB);
}

// Pass: without any cgroup file the limit is MemTotal of the fake meminfo.
TEST_F(FakeCgroups, NoCgroupFilesMeansMemTotal) {
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.memTotalBytes, kMemTotal);
  EXPECT_EQ(m.cgroupLimitBytes, 0u);
  EXPECT_EQ(m.effectiveBytes(), kMemTotal);
  EXPECT_STREQ(m.effectiveSource(), "MemTotal");
}

// Pass: a v1 limit on the process's own cgroup (not the hierarchy root, which
// is unlimited) is found.
TEST_F(FakeCgroups, V1LimitOfOwnCgroupNotTheRoot) {
  write(paths_.procSelfMountinfo, v1Line());
  write(paths_.procSelfCgroup, "9:name=systemd:/\n4:memory:/jobs/job42\n0::/\n");
  write(v1Mount() + "/memory.limit_in_bytes", "9223372036854771712\n");
  write(v1Mount() + "/jobs/memory.limit_in_bytes", "9223372036854771712\n");
  write(v1Mount() + "/jobs/job42/memory.limit_in_bytes", "268435456\n");
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.cgroupLimitBytes, 256 * kMiB);
  EXPECT_EQ(m.effectiveBytes(), 256 * kMiB);
  EXPECT_STREQ(m.effectiveSource(), "cgroup");
  EXPECT_EQ(m.cgroupLimitFile, v1Mount() + "/jobs/job42/memory.limit_in_bytes");
}

// Pass: a parent's smaller limit wins over the leaf's (the kernel enforces both).
TEST_F(FakeCgroups, SmallestLimitOnTheWayUpWins) {
  write(paths_.procSelfMountinfo, v2Line());
  write(paths_.procSelfCgroup, "0::/slice/job/step\n");
  write(v2Mount() + "/slice/memory.max", "max\n");
  write(v2Mount() + "/slice/job/memory.max", "1073741824\n");
  write(v2Mount() + "/slice/job/step/memory.max", "4294967296\n");
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.effectiveBytes(), kGiB);
  EXPECT_EQ(m.cgroupLimitFile, v2Mount() + "/slice/job/memory.max");
}

// Pass: "max" everywhere in v2 means MemTotal.
TEST_F(FakeCgroups, V2MaxMeansNoLimit) {
  write(paths_.procSelfMountinfo, v2Line());
  write(paths_.procSelfCgroup, "0::/user.slice\n");
  write(v2Mount() + "/user.slice/memory.max", "max\n");
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.cgroupLimitBytes, 0u);
  EXPECT_EQ(m.effectiveBytes(), kMemTotal);
}

// Pass: a limit above MemTotal does not raise the figure above MemTotal.
TEST_F(FakeCgroups, LimitAboveMemTotalIsCappedByMemTotal) {
  write(paths_.procSelfMountinfo, v2Line());
  write(paths_.procSelfCgroup, "0::/big\n");
  write(v2Mount() + "/big/memory.max", std::to_string(64 * kGiB) + "\n");
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.cgroupLimitBytes, 64 * kGiB);
  EXPECT_EQ(m.effectiveBytes(), kMemTotal);
  EXPECT_STREQ(m.effectiveSource(), "MemTotal");
}

// Pass: on a hybrid system (v1 memory controller and a v2 mount without it)
// the v1 limit is used, and the smaller of the two when both have one.
TEST_F(FakeCgroups, HybridUsesTheSmallerOfBothHierarchies) {
  write(paths_.procSelfMountinfo, v1Line() + v2Line());
  write(paths_.procSelfCgroup, "4:memory:/a\n0::/b\n");
  write(v1Mount() + "/a/memory.limit_in_bytes", std::to_string(512 * kMiB));
  EXPECT_EQ(detectMemoryLimit(paths_).effectiveBytes(), 512 * kMiB);
  write(v2Mount() + "/b/memory.max", std::to_string(300 * kMiB));
  EXPECT_EQ(detectMemoryLimit(paths_).effectiveBytes(), 300 * kMiB);
}

// Pass: in a container the mount shows a sub-tree (mountinfo root "/docker/x"),
// and /proc/self/cgroup names the full path: the prefix is stripped.
TEST_F(FakeCgroups, MountOfASubtreeStripsItsRoot) {
  write(paths_.procSelfMountinfo, v1Line("/docker/x"));
  write(paths_.procSelfCgroup, "4:memory:/docker/x\n");
  write(v1Mount() + "/memory.limit_in_bytes", std::to_string(2 * kGiB));
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.effectiveBytes(), 2 * kGiB);
  EXPECT_EQ(m.cgroupLimitFile, v1Mount() + "/memory.limit_in_bytes");
}

// Pass: a process outside the mounted sub-tree reads only the mount's root
// (never a directory named like its path below the wrong root).
TEST_F(FakeCgroups, PathOutsideAMountedSubtreeReadsOnlyItsRoot) {
  write(paths_.procSelfMountinfo, v1Line("/docker/x"));
  write(paths_.procSelfCgroup, "4:memory:/other/y\n");
  write(v1Mount() + "/memory.limit_in_bytes", std::to_string(2 * kGiB));
  write(v1Mount() + "/other/y/memory.limit_in_bytes", "1000");
  EXPECT_EQ(detectMemoryLimit(paths_).effectiveBytes(), 2 * kGiB);
}

// Pass: a cgroup-namespace path outside the visible tree ("/../x") falls back
// to the mount's root, never to a path outside the mount.
TEST_F(FakeCgroups, PathOutsideTheNamespaceReadsOnlyTheMountRoot) {
  write(paths_.procSelfMountinfo, v2Line());
  write(paths_.procSelfCgroup, "0::/../sibling\n");
  write(v2Mount() + "/memory.max", std::to_string(3 * kGiB));
  write(root_ + "/sys/fs/cgroup/sibling/memory.max", "1000");
  EXPECT_EQ(detectMemoryLimit(paths_).effectiveBytes(), 3 * kGiB);
}

// Pass: garbage in every file never fails and never yields a limit.
TEST_F(FakeCgroups, MalformedFilesMeanNoLimit) {
  write(paths_.procSelfMountinfo, "garbage\n\n - - -\n" + v2Line());
  write(paths_.procSelfCgroup, "nonsense\n0::/x\n");
  write(v2Mount() + "/x/memory.max", "lots\n");
  const MemoryLimit m = detectMemoryLimit(paths_);
  EXPECT_EQ(m.cgroupLimitBytes, 0u);
  EXPECT_EQ(m.effectiveBytes(), kMemTotal);
}

// Pass: mount points with escaped spaces are found.
TEST_F(FakeCgroups, EscapedMountPathIsUnescaped) {
  const std::string dir = root_ + "/with space";
  write(paths_.procSelfMountinfo,
        "40 31 0:36 / " + root_ + "/with\\040space rw - cgroup2 cgroup2 rw\n");
  write(paths_.procSelfCgroup, "0::/j\n");
  write(dir + "/j/memory.max", std::to_string(kGiB));
  EXPECT_EQ(detectMemoryLimit(paths_).effectiveBytes(), kGiB);
}

// Pass: RAM tier = 25% of the limit; prefetch = 1/16, clamped to [4 MiB, 256 MiB].
TEST(MemoryDefaults, DeriveFromTheLimit) {
  EXPECT_EQ(memoryDefaults(256 * kMiB).ramCacheBytes, 64 * kMiB);
  EXPECT_EQ(memoryDefaults(256 * kMiB).prefetchBytes, 16 * kMiB);
  EXPECT_EQ(memoryDefaults(32 * kMiB).prefetchBytes, 4 * kMiB);
  EXPECT_EQ(memoryDefaults(64 * kGiB).ramCacheBytes, 16 * kGiB);
  EXPECT_EQ(memoryDefaults(64 * kGiB).prefetchBytes, 256 * kMiB);
}

// Pass: this process's RSS is read and plausible (at least one page, below MemTotal).
TEST(CurrentRss, IsReadFromProc) {
  const uint64_t rss = currentRssBytes();
  EXPECT_GT(rss, 4096u);
  EXPECT_LT(rss, detectMemoryLimit().memTotalBytes);
}

}  // namespace
}  // namespace epochfs::fusefs
