// RELIABILITY.md case 2: fio verify through the mount. fio writes files with
// crc32c verify headers into the source (sequential, random-order and
// odd-block-size writes, block sizes that straddle 1 MiB chunks), then
// `fio --readonly --verify_only` reads every block back through the mount
// and checks each header and checksum, on a cold cache, a warm RAM tier
// (page cache dropped), a warm disk tier (daemon restarted over the same
// cache dir, page cache dropped) and peer-served (a two-daemon cluster on
// loopback over UCX/TCP). Label `fault`. Skips only if fio is not installed
// (tools/build installs the Debian package `fio`).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "tests/integration/mount_fixture.h"
#include "tests/loopback_port.h"

namespace epochfs::itest {
namespace {

constexpr const char* kFio = "/usr/bin/fio";

struct FioFile {
  std::string name;
  uint64_t size;
  std::string bs;
  std::string rw;  // how fio writes it into the source
};

const std::vector<FioFile> kFiles = {
    {"seq_1m_plus.bin", 1114112, "16k", "write"},  // 1 MiB + 64 KiB: a partial last chunk
    {"rand_2m.bin", 2097152, "4k", "randwrite"},   // blocks written in random order
    {"odd_12k.bin", 3145728, "12k", "write"},      // 12 KiB blocks straddle chunk boundaries
    {"big_6m.bin", 6291456, "128k", "write"},
    {"small_12k.bin", 12288, "4k", "write"},  // smaller than a chunk
    {"shard0.bin", 262144, "8k", "write"},    // more files: both cluster nodes own some
    {"shard1.bin", 262144, "8k", "randwrite"},
    {"shard2.bin", 393216, "8k", "write"},
    {"shard3.bin", 131072, "8k", "write"},
    {"shard4.bin", 524288, "64k", "randwrite"},
    {"shard5.bin", 65536, "4k", "write"},
};

// A job file: one job per file, writing (into the source) or reading
// everything back in order with the same block size and verify method.
std::string jobFile(const std::string& dir, bool write) {
  std::ostringstream o;
  // verify_state_save=0: fio would otherwise leave *-verify.state files in
  // its working directory (the test's, not its temporary one).
  o << "[global]\nioengine=psync\ndirectory=" << dir << "\nverify=crc32c\nverify_state_save=0\n";
  if (write) o << "do_verify=0\n";
  for (const auto& f : kFiles) {
    o << "[" << f.name << "]\nfilename=" << f.name << "\nsize=" << f.size << "\nbs=" << f.bs
      << "\nrw=" << (write ? f.rw : "read") << "\n";
  }
  return o.str();
}

using test_support::freeLoopbackPort;

size_t countOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

class FioVerifyTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (access(kFio, X_OK) != 0) {
      GTEST_SKIP() << "fio is not installed (" << kFio << "): apt-get install fio, or run "
                   << "tools/build, which installs it";
    }
    writeFile(root_ + "/write.fio", jobFile(src_, true));
    auto r = runProcess({kFio, "--output-format=terse", root_ + "/write.fio"}, 300);
    ASSERT_EQ(r.exitCode, 0) << "fio writing the source: " << r.describe();
    for (const auto& f : kFiles) {
      struct stat st;
      ASSERT_EQ(stat((src_ + "/" + f.name).c_str(), &st), 0) << f.name;
      ASSERT_EQ(static_cast<uint64_t>(st.st_size), f.size) << f.name;
    }
    // The same check on the source itself: the job file and fio are sound.
    verifyThrough(src_, "source");
  }

  // Runs `fio --readonly --verify_only` over every file under `dir`; fails
  // the test on any verify error, job error or short read.
  void verifyThrough(const std::string& dir, const std::string& phase) {
    SCOPED_TRACE("fio verify: " + phase);
    const std::string job = root_ + "/verify-" + std::to_string(++runs_) + ".fio";
    writeFile(job, jobFile(dir, false));
    auto r = runProcess({kFio, "--readonly", "--verify_only", "--output-format=json", job}, 300);
    const std::string all = r.out + r.err;
    EXPECT_EQ(countOf(all, "verify failed"), 0u) << all;
    EXPECT_EQ(r.exitCode, 0) << r.describe();
    // Messages may precede the JSON document on stdout.
    const size_t brace = r.out.find('{');
    ASSERT_NE(brace, std::string::npos) << r.describe();
    auto j = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ASSERT_EQ(j["jobs"].size(), kFiles.size()) << r.out;
    for (const auto& job : j["jobs"]) {
      const std::string name = job.value("jobname", "");
      uint64_t want = 0;
      for (const auto& f : kFiles) {
        if (f.name == name) want = f.size;
      }
      EXPECT_EQ(job.value("error", -1), 0) << name;
      EXPECT_EQ(job["read"].value("io_bytes", uint64_t{0}), want) << name << ": short verify";
    }
    if (!HasFailure()) ++passedPhases_;
  }

  uint64_t dataBytes() const {
    uint64_t n = 0;
    for (const auto& f : kFiles) n += f.size;
    return n;
  }

  uint64_t c(const nlohmann::json& s, std::string_view path) {
    auto v = counter(s, path);
    EXPECT_TRUE(v.has_value()) << "stats lack " << path << ": " << s.dump();
    return v.value_or(0);
  }

  int runs_ = 0;
  int passedPhases_ = 0;
};

// PASS: zero fio verify errors and every byte of every file verified on a cold
// cache (bytes came from the source), then with the page cache dropped from
// the warm RAM tier (no further source bytes, RAM hits grow), then from a
// restarted daemon over the same cache dir with the page cache dropped (disk
// hits, no source bytes at all).
TEST_F(FioVerifyTest, ColdWarmRamAndWarmDiskVerifyClean) {
  const std::vector<std::string> opts = {"--cache-dir", cache_,         "--ram-cache",
                                         "64M",         "--disk-cache", "256M"};
  auto r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_TRUE(dropPageCache());

  verifyThrough(mnt_, "cold");
  auto s1 = stats();
  EXPECT_GE(c(s1, "tiers.source.read_bytes"), dataBytes()) << "cold pass not from the source";

  ASSERT_TRUE(dropPageCache());
  verifyThrough(mnt_, "warm RAM tier");
  auto s2 = stats();
  EXPECT_EQ(c(s2, "tiers.source.read_bytes"), c(s1, "tiers.source.read_bytes"))
      << "the warm pass read the source again";
  EXPECT_GE(c(s2, "tiers.ram.hit_bytes") - c(s1, "tiers.ram.hit_bytes"), dataBytes() / 2)
      << s2.dump();

  ASSERT_TRUE(unmount());
  r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_TRUE(dropPageCache());
  verifyThrough(mnt_, "warm disk tier (restarted daemon)");
  auto s3 = stats();
  EXPECT_EQ(c(s3, "tiers.source.read_bytes"), 0u) << "the restarted daemon read the source";
  // Read-ahead moves chunks from disk into RAM, so part of the pass counts as
  // RAM hits; all of it came from the disk tier (no source bytes).
  EXPECT_GT(c(s3, "tiers.disk.hit_bytes"), 0u) << s3.dump();
  EXPECT_EQ(c(s3, "tiers.disk.corruptions"), 0u);
  EXPECT_EQ(passedPhases_, 4);  // source + three phases
}

// PASS: in a two-daemon cluster (loopback, UCX over TCP, shared secret),
// fio verifies every file through node 0 and then through node 1 with zero
// verify errors, each node got every byte from the source or its peer, and
// the two together read the source about once (each file has one owner; the
// other node gets it from the owner over UCX).
TEST_F(FioVerifyTest, PeerServedVerifiesClean) {
  setenv("UCX_TLS", "tcp", 1);
  const std::string secret = root_ + "/secret";
  writeFile(secret, "fio-verify-test-secret-0123456789", 0600);
  std::vector<std::string> mnts;
  for (int attempt = 0; attempt < 3 && mnts.size() < 2; ++attempt) {
    for (const auto& m : mnts) unmount(m);
    mnts.clear();
    const uint16_t ports[2] = {freeLoopbackPort(), freeLoopbackPort()};
    const std::string peers =
        "127.0.0.1:" + std::to_string(ports[0]) + ",127.0.0.1:" + std::to_string(ports[1]);
    for (int i = 0; i < 2; ++i) {
      const std::string mnt = root_ + "/mnt" + std::to_string(i);
      const std::string cache = root_ + "/cache" + std::to_string(i);
      mkdirs(mnt);
      mkdirs(cache);
      auto r = mountAt(
          src_, mnt,
          {"--peers", peers, "--listen", "127.0.0.1:" + std::to_string(ports[i]), "--secret-file",
           secret, "--cache-dir", cache, "--ram-cache", "64M", "--prefetch-window", "0",
           "--log-file", root_ + "/log" + std::to_string(i), "--log-level", "info"});
      if (r.exitCode != 0) {
        // A port picked free can be taken before the daemon binds it: retry.
        ASSERT_NE(r.describe().find("cannot listen"), std::string::npos) << r.describe();
        break;
      }
      mnts.push_back(mnt);
    }
  }
  ASSERT_EQ(mnts.size(), 2u);
  // Both see each other before the reads.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  for (const auto& m : mnts) {
    for (;;) {
      int live = 0;
      const auto j = admin("peers", m);
      for (const auto& p : j.value("peers", nlohmann::json::array())) {
        live += p.value("live", false);
      }
      if (live == 2) break;
      ASSERT_LT(std::chrono::steady_clock::now(), until) << m << ": " << admin("peers", m).dump();
      usleep(50000);
    }
  }
  ASSERT_TRUE(dropPageCache());
  verifyThrough(mnts[0], "node 0, cold cluster");
  ASSERT_TRUE(dropPageCache());
  verifyThrough(mnts[1], "node 1, node 0 warm");
  // Bytes each node fetched from its peer (read-ahead included).
  auto fetched = [&](const std::string& m) {
    uint64_t n = 0;
    const auto j = admin("peers", m);
    for (const auto& p : j["peers"]) n += p.value("bytes_fetched", uint64_t{0});
    return n;
  };
  const uint64_t peer0 = fetched(mnts[0]);
  const uint64_t peer1 = fetched(mnts[1]);
  RecordProperty("peer_bytes_node0", std::to_string(peer0));
  RecordProperty("peer_bytes_node1", std::to_string(peer1));
  EXPECT_GT(peer0 + peer1, 0u) << "no byte was served by a peer";
  // Together the two nodes read each file from the source once: whatever a
  // node did not read itself came from its peer.
  const uint64_t src0 = c(stats(mnts[0]), "tiers.source.read_bytes");
  const uint64_t src1 = c(stats(mnts[1]), "tiers.source.read_bytes");
  SCOPED_TRACE("peer bytes: node 0 " + std::to_string(peer0) + ", node 1 " + std::to_string(peer1) +
               "; source bytes: node 0 " + std::to_string(src0) + ", node 1 " +
               std::to_string(src1) + "; data " + std::to_string(dataBytes()));
  EXPECT_GE(peer0 + src0, dataBytes()) << "node 0's bytes came from neither";
  EXPECT_GE(peer1 + src1, dataBytes()) << "node 1's bytes came from neither";
  EXPECT_LE(src0 + src1, dataBytes() + dataBytes() / 4) << "files read from the source twice";
  EXPECT_EQ(passedPhases_, 3);
  for (const auto& m : mnts) EXPECT_TRUE(unmount(m));
}

}  // namespace
}  // namespace epochfs::itest
