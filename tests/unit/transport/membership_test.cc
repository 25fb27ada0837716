#include "transport/membership.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace epochfs::transport {
namespace {

std::vector<std::string> expand(const std::string& s) {
  auto r = expandSlurmNodelist(s);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? *r : std::vector<std::string>{};
}

TEST(SlurmNodelist, ExpandsLikeScontrol) {
  EXPECT_EQ(expand("node1"), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(expand("n[1-3,5]"), (std::vector<std::string>{"n1", "n2", "n3", "n5"}));
  EXPECT_EQ(expand("gpu[08-10],login"),
            (std::vector<std::string>{"gpu08", "gpu09", "gpu10", "login"}));
  EXPECT_EQ(expand("r[1-2]-n[1-2]"),
            (std::vector<std::string>{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(expand("a[7],b,c[001-002]"), (std::vector<std::string>{"a7", "b", "c001", "c002"}));
  EXPECT_FALSE(expandSlurmNodelist("n[1-").isOk());
  EXPECT_FALSE(expandSlurmNodelist("n[3-1]").isOk());
  EXPECT_FALSE(expandSlurmNodelist("n[a-b]").isOk());
}

TEST(Hostfile, LinesAreNodeIds) {
  auto r = parseHostfileText(
      "# job 42\nhostA\n\nhostB:9000  # gpu\n10.0.0.3:7000 slots=8\n[::1]:5\n", 7711);
  ASSERT_TRUE(r.isOk());
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].address(), "hostA:7711");
  EXPECT_EQ((*r)[1].address(), "hostB:9000");
  EXPECT_EQ((*r)[2].id, 2u);
  EXPECT_EQ((*r)[2].address(), "10.0.0.3:7000");
  EXPECT_EQ((*r)[3].host, "::1");
  EXPECT_FALSE(parseHostfileText("h:99999\n", 1).isOk());
}

TEST(Membership, FindsSelfByListenOrNodeId) {
  MembershipSpec s;
  s.peers = "127.0.0.1:5001,127.0.0.1:5002,127.0.0.1:5003";
  s.listen = "127.0.0.1:5002";
  auto m = resolveMembership(s);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->selfId, 1u);
  EXPECT_EQ(m->members.size(), 3u);
  s.listen = "127.0.0.1:6000";
  EXPECT_FALSE(resolveMembership(s).isOk());
  s.listen.clear();
  s.nodeId = 2;
  m = resolveMembership(s);
  ASSERT_TRUE(m.isOk());
  EXPECT_EQ(m->listenPort, 5003);
  s.nodeId = 3;
  EXPECT_FALSE(resolveMembership(s).isOk());
}

TEST(Membership, HostfileAndSlurm) {
  char path[] = "/tmp/epochfs-hostfile-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "a:1\nb:2\n";
  MembershipSpec s;
  s.hostfile = path;
  s.nodeId = 1;
  auto m = resolveMembership(s);
  ASSERT_TRUE(m.isOk());
  EXPECT_EQ(m->listenHost, "b");
  unlink(path);

  MembershipSpec sl;
  sl.slurm = true;
  setenv("SLURM_JOB_NODELIST", "gpu[1-4]", 1);
  setenv("SLURM_NODEID", "2", 1);
  m = resolveMembership(sl);
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->members.size(), 4u);
  EXPECT_EQ(m->selfId, 2u);
  EXPECT_EQ(m->members[2].host, "gpu3");
  EXPECT_EQ(m->listenHost, "0.0.0.0");
  EXPECT_EQ(m->listenPort, kDefaultPort);
  unsetenv("SLURM_JOB_NODELIST");
  unsetenv("SLURM_NODEID");
  EXPECT_FALSE(resolveMembership(sl).isOk());
  MembershipSpec both = s;
  both.slurm = true;
  EXPECT_FALSE(resolveMembership(both).isOk());
}

}  // namespace
}  // namespace epochfs::transport
