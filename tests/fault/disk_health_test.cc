// Fault-injection tests of a failing disk tier (RELIABILITY.md case 7b), label
// `fault`. The real daemon is mounted with the test-only environment variable
// EPOCHFS_TEST_DISK_FAULTS naming a control file (cache/disk_faults.h); the
// test writes `read=eio`, `write=enospc` or `stall_ms=3000` into it while the
// daemon runs, and removes it to clear the fault. Each test states its pass
// criterion; the fixture always unmounts.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "cache/disk_faults.h"
#include "tests/fault/disk_test_util.h"
#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

using Clock = std::chrono::steady_clock;
// Hang detector for one whole-file read while the disk tier fails (the tier's
// I/O deadline is 1 s): generous, not a speed bound.
constexpr auto kReadBound = std::chrono::seconds(2);

class DiskHealthMountTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped()) return;
    control_ = root_ + "/disk-faults";
    ASSERT_EQ(setenv(cache::DiskFaults::kEnvVar, control_.c_str(), 1), 0);
  }
  void TearDown() override {
    unsetenv(cache::DiskFaults::kEnvVar);
    MountTest::TearDown();
  }
  std::vector<std::string> opts() const {
    return {"--cache-dir", cache_, "--ram-cache", "1M", "--disk-cache", "256M"};
  }
  // Replaces the control file atomically (the daemon re-reads it within 50 ms).
  void setFaults(const std::string& text) {
    writeFile(control_ + ".tmp", text + "\n", 0600);
    ASSERT_EQ(rename((control_ + ".tmp").c_str(), control_.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  void clearFaults() { ASSERT_EQ(unlink(control_.c_str()), 0); }

  // Reads every file; counts the ones not bit-exact or slower than kReadBound.
  int verifyAllBounded(const Files& f) {
    int bad = 0;
    double slowest = 0;
    for (const auto& [name, want] : f.data) {
      const auto start = Clock::now();
      auto r = readFile(mnt_ + "/" + name);
      const auto took = Clock::now() - start;
      slowest = std::max(slowest, std::chrono::duration<double>(took).count());
      if (r.err != 0 || r.data != want || took > kReadBound) {
        if (++bad <= 5) {
          ADD_FAILURE() << name << ": " << (r.err ? strerror(r.err) : "") << " "
                        << (r.data != want ? "WRONG BYTES" : "") << " in "
                        << std::chrono::duration<double>(took).count() << " s";
        }
      }
    }
    RecordProperty("slowest_read_s", std::to_string(slowest));
    return bad;
  }
  // Polls stats until `done` holds for them (up to `limit`); the last stats.
  nlohmann::json waitStats(const std::function<bool(const nlohmann::json&)>& done,
                           std::chrono::seconds limit) {
    const auto end = Clock::now() + limit;
    nlohmann::json s;
    do {
      s = stats();
      if (done(s)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (Clock::now() < end);
    return s;
  }
  // Polls stats until tiers.disk.healthy == want (up to `limit`); the last stats.
  nlohmann::json waitHealthy(bool want, std::chrono::seconds limit) {
    return waitStats(
        [&](const nlohmann::json& s) { return s["tiers"]["disk"].value("healthy", !want) == want; },
        limit);
  }
  // After the fault is cleared: one pass re-admits chunks, the next must get
  // disk hits for at least half the files. PASS part shared by every test.
  void expectTierUsedAgain(const Files& f) {
    auto s = waitHealthy(true, std::chrono::seconds(30));
    ASSERT_TRUE(s["tiers"]["disk"].value("healthy", false))
        << "the disk tier was not taken back into use: " << s.dump();
    dropCaches();
    EXPECT_EQ(verifyAll(mnt_, f), 0) << "re-admitting pass";
    const uint64_t before = num(stats(), "tiers.disk.hit_chunks");
    dropCaches();
    EXPECT_EQ(verifyAll(mnt_, f), 0) << "pass after recovery";
    s = stats();
    // hit_chunks counts read pieces served from the tier: >= 1 per file it had.
    EXPECT_GE(num(s, "tiers.disk.hit_chunks") - before, f.data.size() / 2)
        << "disk hits did not rise after recovery: " << s.dump();
  }

  std::string control_;
};

// PASS: with EIO injected on every disk-tier read of a warm tier, every file
// reads bit-exact (from the source) within 2 s each; tiers.disk.healthy turns
// false with read_errors >= 3 and errors >= 3, and the metrics say
// epochfs_disk_healthy 0; after the fault is cleared a probe re-admits the
// tier (healthy again within 30 s) and disk hits rise.
TEST_F(DiskHealthMountTest, ReadEioFallsBackToTheSourceAndRecovers) {
  Files f = makeFiles(src_, 10, kFileBytes, 101);
  auto r = mount(opts());
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(verifyAll(mnt_, f), 0) << "cold pass";
  setFaults("read=eio");
  dropCaches();
  EXPECT_EQ(verifyAllBounded(f), 0);
  auto s = stats();
  const auto& d = s["tiers"]["disk"];
  EXPECT_FALSE(d.value("healthy", true)) << s.dump();
  EXPECT_GE(num(s, "tiers.disk.read_errors"), 3u) << s.dump();
  EXPECT_GE(num(s, "tiers.disk.errors"), 3u) << s.dump();
  EXPECT_GE(num(s, "tiers.disk.unhealthy_events"), 1u) << s.dump();
  auto met = admin("metrics");
  const std::string text = met.value("text", "");
  EXPECT_NE(text.find("epochfs_disk_healthy{mountpoint=\"" + mnt_ + "\"} 0"), std::string::npos)
      << text.substr(0, 400);
  clearFaults();
  expectTierUsedAgain(f);
}

// PASS: with ENOSPC injected on every disk-tier write, a cold pass reads every
// file bit-exact within 2 s each; the tier goes unhealthy with write_errors >=
// 3 and holds no bytes (nothing half written); after clearing, it is healthy
// again and disk hits rise.
TEST_F(DiskHealthMountTest, WriteEnospcKeepsReadsWholeAndRecovers) {
  Files f = makeFiles(src_, 10, kFileBytes, 102);
  setFaults("write=enospc");
  auto r = mount(opts());
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(verifyAllBounded(f), 0);
  auto s = stats();
  EXPECT_FALSE(s["tiers"]["disk"].value("healthy", true)) << s.dump();
  EXPECT_GE(num(s, "tiers.disk.write_errors"), 3u) << s.dump();
  EXPECT_EQ(num(s, "tiers.disk.used_bytes"), 0u) << s.dump();
  clearFaults();
  expectTierUsedAgain(f);
}

// PASS: with every disk-tier I/O stalled 3 s on a warm tier, every file reads
// bit-exact within 2 s each (a read waits for the disk at most the 1 s
// deadline, then the tier is bypassed); tiers.disk.healthy is false with
// timeouts >= 1; probes keep it out while the stall lasts; after clearing it
// is healthy again and disk hits rise.
TEST_F(DiskHealthMountTest, ThreeSecondStallNeverHoldsAReadPastTheBound) {
  Files f = makeFiles(src_, 10, kFileBytes, 103);
  auto r = mount(opts());
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  ASSERT_EQ(verifyAll(mnt_, f), 0) << "cold pass";
  setFaults("stall_ms=3000");
  dropCaches();
  EXPECT_EQ(verifyAllBounded(f), 0);
  auto s = stats();
  EXPECT_FALSE(s["tiers"]["disk"].value("healthy", true)) << s.dump();
  EXPECT_GE(num(s, "tiers.disk.timeouts"), 1u) << s.dump();
  // A probe runs while the stall lasts, and fails (too slow).
  s = waitStats([](const nlohmann::json& st) { return num(st, "tiers.disk.probe_failures") >= 1; },
                std::chrono::seconds(30));
  EXPECT_GE(num(s, "tiers.disk.probe_failures"), 1u) << s.dump();
  EXPECT_FALSE(s["tiers"]["disk"].value("healthy", true)) << "a slow probe passed: " << s.dump();
  clearFaults();
  expectTierUsedAgain(f);
}

}  // namespace
}  // namespace epochfs::itest
