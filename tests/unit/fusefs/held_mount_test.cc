// encodeHeldMount / decodeHeldMount: what the supervisor keeps of each mount
// (the "mount" message and a restarted worker's EPOCHFS_MOUNTS), with the
// mount's own allow_other and --order, and an older release's four fields.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "fusefs/daemon/supervisor_link.h"

namespace epochfs::fusefs {
namespace {

TEST(HeldMount, RoundTripsEveryField) {
  HeldMount m;
  m.mountpoint = "/mnt/a,b:c";  // the separators travel hex-encoded
  m.fd = 7;
  m.initMessage = std::string("\0\x01init", 6);
  m.owner = 2001;
  m.allowOther = true;
  m.order = "torch-distributed:seed=5,world=2,ranks=0+1";
  auto back = decodeHeldMount(encodeHeldMount(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->mountpoint, m.mountpoint);
  EXPECT_EQ(back->fd, 7);
  EXPECT_EQ(back->initMessage, m.initMessage);
  EXPECT_EQ(back->owner, 2001u);
  EXPECT_TRUE(back->allowOther);
  EXPECT_EQ(back->order, m.order);
}

TEST(HeldMount, AnOlderReleasesFourFieldsDecode) {
  auto m = decodeHeldMount("5:2f6d6e74:6869:0");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mountpoint, "/mnt");
  EXPECT_EQ(m->initMessage, "hi");
  EXPECT_FALSE(m->allowOther);
  EXPECT_EQ(m->order, "");
}

TEST(HeldMount, MalformedEntriesAreDropped) {
  for (const char* bad : {"", "x:2f6d6e74:6869:0", "5:2f6d6e74:6869", "5::6869:0", "5:2f6d6e74::0",
                          "-1:2f6d6e74:6869:0", "5:2f6d6e74:6869:0:1"}) {
    EXPECT_FALSE(decodeHeldMount(bad).has_value()) << bad;
  }
  // The list form also drops entries whose descriptor is not open here.
  const int fd = open("/dev/null", O_RDONLY);
  HeldMount live{"/mnt/a", fd, "init", 0, false, ""};
  HeldMount gone{"/mnt/b", 999999, "init", 0, false, ""};
  const auto held = decodeHeldMounts(encodeHeldMounts({live, gone}) + ",junk");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].mountpoint, "/mnt/a");
  close(fd);
}

}  // namespace
}  // namespace epochfs::fusefs
