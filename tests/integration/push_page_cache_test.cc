// --push-page-cache: prefetched files are pushed into the kernel's page cache
// (fuse_lowlevel_notify_store) on a real mount with the real prefetcher, read
// back without waking the daemon, and the opens keep the readers' position.
// Other processes on a shared machine may drop the page cache at any moment
// (echo 3 > drop_caches also forgets the inodes), which sends reads back to
// the daemon: the "no daemon reads" check may retry the epoch (3 tries); the
// byte checks never do.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "tests/integration/admin_test_util.h"

namespace epochfs::itest {
namespace {

using nlohmann::json;

// prefix + n (GCC 12 warns falsely on "literal" + std::to_string(n) at -O3).
std::string numbered(const char* prefix, uint64_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

// Param: supervised or not, and the push mode (on: opens carry the position;
// sentinels: every 8th entry is read from the daemon and carries it).
struct PushCase {
  bool supervised;
  std::string mode;
};

class PushPageCacheTest : public MountTest, public ::testing::WithParamInterface<PushCase> {
 protected:
  // `n` files in 3 class directories: mostly 1–60 KB, every 10th 1.5 MiB
  // (two chunks).
  void makeDataset(int n) {
    std::mt19937 rng(11);
    for (int c = 0; c < 3; ++c) mkdirs(src_ + "/" + numbered("c", c));
    for (int i = 0; i < n; ++i) {
      std::string rel = numbered("c", i % 3);
      rel += "/";
      rel += numbered("s", i);
      rel += ".jpg";
      const size_t size = i % 10 == 9 ? (3u << 19) : 1000 + rng() % 60000;
      writeFile(src_ + "/" + rel, randomBytes(size, 1000 + i));
      files_.push_back(rel);
    }
  }
  std::string writeOrder(const std::vector<std::string>& order) {
    const std::string path = root_ + "/order";
    std::ofstream o(path);
    for (const auto& f : order) o << f << "\n";
    return path;
  }
  uint64_t pushed() { return counter(stats(), "prefetch.pushed_files").value_or(0); }
  // Waits (a hang detector, not a speed bound) until the plan's `n` entries
  // were fetched and nothing is in flight (each push precedes its release).
  bool waitPrefetched(uint64_t n) {
    for (int i = 0; i < 3000; ++i) {
      const json st = stats();
      const json& streams = st["prefetch"]["streams"];
      if (streams.size() == 1 && streams[0]["prefetched_files"].get<uint64_t>() >= n &&
          counter(st, "prefetch.inflight_tasks").value_or(1) == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Waits (a hang detector, not a speed bound) until `target` files were pushed.
  bool waitPushed(uint64_t target) {
    for (int i = 0; i < 3000 && pushed() < target; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pushed() >= target;
  }
  std::vector<std::string> files_;
};

// Pass: after the plan's files were pushed, reading them all in the plan's
// order returns exactly the source's bytes (XXH3), the daemon serves at most
// 5% of them as read requests, with every file pushed (in one of 3 tries), no push fails, and the
// stream's position reaches the end of the plan (opens tracked it; the plan
// did not expire; with sentinels: the 1/8 un-pushed entries are the reads
// the daemon serves, and the position trails the end by at most 16).
TEST_P(PushPageCacheTest, PushedFilesAreReadWithoutTheDaemonAndAdvanceThePosition) {
  makeDataset(120);
  const bool sentinels = GetParam().mode == "sentinels";
  std::vector<std::string> extra = {"--push-page-cache", GetParam().mode, "--prefetch-window",
                                    "512"};
  if (!GetParam().supervised) extra.push_back("--no-supervisor");
  auto r = mount(extra);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  snapshotTree(mnt_, false);  // the ImageFolder scan: the kernel knows every inode
  std::map<std::string, uint64_t> sourceHash;
  for (const auto& f : files_) sourceHash[f] = xxh3(readFile(src_ + "/" + f).data);

  bool quiet = false;
  uint64_t served = 0;
  std::string tries;  // what each try that was not quiet saw, for the failure message
  for (int attempt = 0; attempt < 3 && !quiet; ++attempt) {
    auto order = files_;
    std::shuffle(order.begin(), order.end(), std::mt19937(attempt));
    const uint64_t before = pushed();
    ProcResult o = runCtl({"order", mnt_, "--epoch", std::to_string(attempt), writeOrder(order)});
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    ASSERT_TRUE(waitPrefetched(order.size()));
    // Not all pushed: someone dropped the inodes (echo 3 > drop_caches) before
    // the push; the reads below look them up again for the next try.
    const uint64_t pushedNow = pushed() - before;
    const uint64_t reads0 = counter(stats(), "read_requests").value_or(0);
    for (const auto& f : order) {
      auto got = readFile(mnt_ + "/" + f);
      ASSERT_EQ(got.err, 0) << f;
      ASSERT_EQ(xxh3(got.data), sourceHash[f]) << f << " differs from the source";
    }
    const json st = stats();
    served = counter(st, "read_requests").value_or(0) - reads0;
    ASSERT_EQ(st["prefetch"]["streams"].size(), 1u) << st.dump();  // not expired
    const json& s = st["prefetch"]["streams"][0];
    // Sentinels: a read sweeps the pushed entries more than 16 before it.
    const uint64_t sentinelCount = sentinels ? order.size() / 8 : 0;
    if (sentinels) {
      EXPECT_GE(s["position"].get<uint64_t>(), order.size() - 16) << s.dump();
    } else {
      EXPECT_EQ(s["position"].get<uint64_t>(), order.size()) << s.dump();
    }
    EXPECT_EQ(counter(st, "prefetch.push_failures").value_or(1), 0u);
    quiet =
        pushedNow == order.size() - sentinelCount && served <= sentinelCount + order.size() / 20;
    if (!quiet) {
      tries += "; try " + std::to_string(attempt) + ": " + std::to_string(pushedNow) + " pushed, " +
               std::to_string(served) + " daemon reads";
    }
  }
  EXPECT_TRUE(quiet) << "not every file pushed, or the daemon served " << served
                     << " read requests for " << files_.size() << " pushed files" << tries;
}

INSTANTIATE_TEST_SUITE_P(Modes, PushPageCacheTest,
                         ::testing::Values(PushCase{true, "on"}, PushCase{false, "on"},
                                           PushCase{true, "sentinels"},
                                           PushCase{false, "sentinels"}),
                         [](const auto& info) {
                           std::string name = info.param.supervised ? "Supervised" : "NoSupervisor";
                           name += info.param.mode == "on" ? "Opens" : "Sentinels";
                           return name;
                         });

class PushRevalidateTest : public PushPageCacheTest {};

// Pass (docs/SEMANTICS.md, --revalidate): a file pushed into the page cache
// and then changed in the source is read with its new bytes once the
// interval has passed (the first open after the change drops the pushed
// pages); an unchanged pushed file still reads its bytes; and a plan
// registered after the change pushes the new version, read back intact.
TEST_F(PushRevalidateTest, FileChangedAfterItsPushIsReadWithTheNewBytes) {
  makeDataset(30);
  auto r = mount({"--push-page-cache", "on", "--revalidate", "1"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  snapshotTree(mnt_, false);
  ProcResult o = runCtl({"order", mnt_, writeOrder(files_)});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  ASSERT_TRUE(waitPushed(files_.size()));

  const std::string changed = files_[4], unchanged = files_[5];
  const std::string old = readFile(src_ + "/" + changed).data;
  const std::string fresh = randomBytes(old.size(), 999);  // same size: only mtime tells
  writeFile(src_ + "/" + changed, fresh);
  struct timespec ts[2] = {{1700000000, 0}, {1700000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (src_ + "/" + changed).c_str(), ts, 0), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  auto got = readFile(mnt_ + "/" + changed);
  ASSERT_EQ(got.err, 0);
  EXPECT_TRUE(got.data == fresh) << (got.data == old ? "still the old (pushed) bytes"
                                                     : "neither old nor new bytes");
  EXPECT_EQ(xxh3(readFile(mnt_ + "/" + unchanged).data),
            xxh3(readFile(src_ + "/" + unchanged).data));

  // A new plan after the change: the new version is pushed and read intact.
  const uint64_t before = pushed();
  o = runCtl({"order", mnt_, "--epoch", "1", writeOrder({changed})});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  ASSERT_TRUE(waitPushed(before + 1));
  got = readFile(mnt_ + "/" + changed);
  ASSERT_EQ(got.err, 0);
  EXPECT_TRUE(got.data == fresh);
}

}  // namespace
}  // namespace epochfs::itest
