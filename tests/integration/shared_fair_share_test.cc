// Two jobs share one daemon's RAM tier (docs/ADMIN.md "One daemon, several
// mounts"): one job's `warm` of the whole dataset must not take the room the
// other job's registered order needs. Real mounts, counts from outside the
// daemon (the worker's /proc/PID/io rchar: the bytes it read from the source).
// Each test states its pass criterion above it.
#include <sys/stat.h>

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

class SharedFairShareTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int d = 0; d < 4; ++d) {
      const std::string dir = "c" + std::to_string(d);
      dirs_.push_back(dir);
      mkdirs(src_ + "/" + dir);
      for (int i = 0; i < 100; ++i) {
        const std::string rel = dir + "/f" + std::to_string(i) + ".bin";
        const std::string data = randomBytes(100 * 1000 + 37 * i, 100 * d + i);
        files_.push_back(rel);
        bytes_ += data.size();
        writeFile(src_ + "/" + rel, data);
      }
    }
  }

  // Registers a shuffled order of every file (seed) as rank 0 on `mnt`;
  // returns the order.
  std::vector<std::string> registerOrder(const std::string& mnt, uint64_t seed) {
    std::vector<std::string> order = files_;
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    const std::string path = root_ + "/order-" + std::to_string(seed);
    std::ofstream out(path);
    for (const auto& f : order) out << f << "\n";
    out.close();
    const ProcResult r = runCtl({"order", mnt, path});
    EXPECT_EQ(r.exitCode, 0) << r.describe();
    return order;
  }

  // Reads `order` through `mnt` (page cache dropped first); returns the bytes
  // the worker read meanwhile (/proc/PID/io rchar).
  uint64_t readEpoch(const std::string& mnt, const std::vector<std::string>& order, pid_t worker) {
    dropCaches(mnt);
    const uint64_t before = procIo(worker)["rchar"];
    for (const auto& f : order) EXPECT_EQ(readFile(mnt + "/" + f).err, 0) << f;
    return procIo(worker)["rchar"] - before;
  }

  std::vector<std::string> dirs_, files_;
  uint64_t bytes_ = 0;
};

// Pass: mounts A and B of one daemon, the RAM tier at half the dataset (400
// files, 40 MB), no prefetch (the reads decide what is cached), each job
// with its own order registered every epoch. B's epoch after A warmed the
// whole dataset reads at most 1.05x the source bytes of B's epoch before it
// (+1 file of slack), both measured after a warm-up epoch.
TEST_F(SharedFairShareTest, OneJobsWarmDoesNotEvictTheOthersPlannedChunks) {
  const std::vector<std::string> opts = {"--ram-cache", "20M", "--prefetch-window", "0"};
  auto r = mount(opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string mntB = root_ + "/mntB";
  mkdirs(mntB);
  r = mountAt(src_, mntB, opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const pid_t worker = daemonPid();
  ASSERT_EQ(daemonPid(mntB), worker) << "B did not join A's daemon";

  registerOrder(mnt_, 10);
  readEpoch(mntB, registerOrder(mntB, 20), worker);  // warm-up

  registerOrder(mnt_, 11);
  const uint64_t alone = readEpoch(mntB, registerOrder(mntB, 21), worker);

  registerOrder(mnt_, 12);
  const auto orderB = registerOrder(mntB, 22);
  std::vector<std::string> warm = {"warm", mnt_};
  warm.insert(warm.end(), dirs_.begin(), dirs_.end());
  r = runCtl(warm, 120);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const uint64_t afterWarm = readEpoch(mntB, orderB, worker);

  RecordProperty("b_source_bytes_alone", std::to_string(alone));
  RecordProperty("b_source_bytes_after_a_warm", std::to_string(afterWarm));
  RecordProperty("dataset_bytes", std::to_string(bytes_));
  EXPECT_GT(alone, 0u);
  EXPECT_LE(static_cast<double>(afterWarm), 1.05 * static_cast<double>(alone) + 101000)
      << "B read " << afterWarm << " source bytes after A's warm, " << alone << " before";
}

}  // namespace
}  // namespace epochfs::itest
