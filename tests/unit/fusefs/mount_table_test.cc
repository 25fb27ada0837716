// MountTable (fusefs/mount_table.h): the one /proc/self/mountinfo parser.
// The same sample as its Python twin's test (tests/unit/python/test_mount_table.py).
#include "fusefs/mount_table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace epochfs::fusefs {
namespace {

// A mount point with a space (\040) and a tab (\011), a source with a
// backslash (\134), optional fields, and lines that do not parse.
constexpr const char* kSample =
    "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
    "97 29 0:52 / /tmp/a\\040b\\011c rw,nosuid,nodev,relatime shared:40 master:3 - "
    "fuse.epochfs /data\\134set ro,user_id=0,group_id=0,allow_other\n"
    "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "garbage without a separator\n"
    "1 2 3 4 5 - too short\n";

TEST(MountTableTest, ParsesFieldsAroundOptionalOnes) {
  std::istringstream in(kSample);
  const std::vector<MountEntry> mounts = MountTable::parse(in);
  ASSERT_EQ(mounts.size(), 3u);
  const MountEntry& m = mounts[1];
  EXPECT_EQ(m.mountId, 97);
  EXPECT_EQ(m.device, "0:52");
  EXPECT_EQ(m.root, "/");
  EXPECT_EQ(m.mountOptions, "rw,nosuid,nodev,relatime");
  EXPECT_EQ(m.fstype, "fuse.epochfs");
  EXPECT_EQ(m.superOptions, "ro,user_id=0,group_id=0,allow_other");
  EXPECT_TRUE(MountTable::hasOption(mounts[2].superOptions, "memory"));
  EXPECT_FALSE(MountTable::hasOption(mounts[2].superOptions, "mem"));
}

TEST(MountTableTest, DecodesSpaceTabAndBackslashEscapes) {
  std::istringstream in(kSample);
  const std::vector<MountEntry> mounts = MountTable::parse(in);
  ASSERT_EQ(mounts.size(), 3u);
  EXPECT_EQ(mounts[1].mountPoint, "/tmp/a b\tc");
  EXPECT_EQ(mounts[1].source, "/data\\set");
  EXPECT_EQ(MountTable::unescape("a\\012b"), "a\nb");
  EXPECT_EQ(MountTable::unescape("no\\9escape\\04"), "no\\9escape\\04");
}

TEST(MountTableTest, ReadsThisProcessMounts) {
  bool root = false;
  for (const MountEntry& m : MountTable::read()) root = root || m.mountPoint == "/";
  EXPECT_TRUE(root);
}

}  // namespace
}  // namespace epochfs::fusefs
