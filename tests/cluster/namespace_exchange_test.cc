// One walk per job (docs/CLUSTER.md "One walk per job"): four daemons started
// at once over one source, as srun starts them. The source's directory opens
// are counted outside the daemons with inotify: one walk opens each directory
// once.
#include <dirent.h>

#include <cstring>

#include "tests/cluster/cluster_mount_fixture.h"

namespace epochfs::itest {
namespace {

// Counts opens of the watched directories themselves (a walk's openat of each).
class DirOpenCounter {
 public:
  explicit DirOpenCounter(const std::vector<std::string>& dirs) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    for (const auto& d : dirs) inotify_add_watch(fd_, d.c_str(), IN_OPEN | IN_ONLYDIR);
  }
  ~DirOpenCounter() { close(fd_); }
  uint64_t take() {
    uint64_t opens = 0;
    alignas(inotify_event) char buf[65536];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) {
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        // The watched directory itself (no name): each directory once.
        if ((ev->mask & IN_OPEN) && (ev->mask & IN_ISDIR) && ev->len == 0) ++opens;
        p += sizeof(inotify_event) + ev->len;
      }
    }
    return opens;
  }

 private:
  int fd_;
};

// The processes whose command line names `mnt`: the daemon still starting
// and the launcher waiting for it to mount.
std::vector<pid_t> processesServing(const std::string& mnt) {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    if (argv0.size() < 7 || argv0.compare(argv0.size() - 7, 7, "epochfs") != 0) continue;
    if (cmd.find(std::string(1, '\0') + mnt + '\0') != std::string::npos) found.push_back(pid);
  }
  if (d != nullptr) closedir(d);
  return found;
}

class NamespaceExchangeTest : public ClusterMountTest {
 protected:
  // `dirs` class directories of `perDir` files, 1 KB to 300 KB (most larger
  // than one FUSE read); returns every directory, the root included.
  std::vector<std::string> makeTree(int dirs, int perDir) {
    std::vector<std::string> all = {src_};
    for (int d = 0; d < dirs; ++d) {
      char dir[16];
      std::snprintf(dir, sizeof dir, "n%d", 1000 + d);
      all.push_back(src_ + "/" + dir);
      mkdirs(all.back());
      for (int i = 0; i < perDir; ++i) {
        char rel[32];
        std::snprintf(rel, sizeof rel, "%s/%d.JPEG", dir, i);
        const uint64_t seed = static_cast<uint64_t>(d * perDir + i + 1);
        const auto bytes = randomBytes(1000 + static_cast<size_t>(seed * 7919) % 300000, seed);
        writeFile(all.back() + "/" + (rel + std::strlen(dir) + 1), bytes);
        hashes_[rel] = xxh3(bytes);
      }
    }
    return all;
  }

  // Starts n daemons at once, each on a thread (the members wait on each
  // other); returns each one's result.
  std::vector<ProcResult> startAtOnce(int n, uint64_t ramBytes,
                                      const std::vector<std::string>& extra) {
    const std::string peers = pickPorts(n);
    std::vector<ProcResult> results(static_cast<size_t>(n));
    std::vector<std::thread> starts;
    mnts_.clear();
    for (int i = 0; i < n; ++i) {
      const std::string mnt = root_ + "/mnt" + std::to_string(i);
      mkdirs(mnt);
      mnts_.push_back(mnt);
      // One machine: each member its own daemon, started at once (not one
      // after the other, as the mounts of one dataset on one node are).
      auto args = nodeArgs(i, peers, secret_, ramBytes, extra);
      args.push_back("--own-daemon");
      starts.emplace_back([this, i, mnt, args, &results] {
        results[static_cast<size_t>(i)] = mountAt(src_, mnt, args, 120);
      });
    }
    for (auto& t : starts) t.join();
    return results;
  }

  nlohmann::json dataset(size_t node) { return admin("status", mnts_[node])["dataset"]; }
};

// Fan-out 2 over 4 members: node 0 walks, nodes 1 and 2 receive from it, node
// 3 from node 1 (a relay). The source's directories are opened once for the
// job (plus each daemon's open of the root), every node serves every byte.
TEST_F(NamespaceExchangeTest, OneMemberWalksTheOthersReceiveDownATree) {
  const auto dirs = makeTree(100, 20);  // 2,000 files, ~300 MB
  const size_t n = 4;
  DirOpenCounter opens(dirs);
  const auto results = startAtOnce(static_cast<int>(n), 64 << 20, {"--namespace-fan-out", "2"});
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(results[i].exitCode, 0) << i << results[i].describe();
  const uint64_t dirOpens = opens.take();
  std::printf("directory opens during the start: %llu (one walk: %zu, %zu daemons)\n",
              static_cast<unsigned long long>(dirOpens), dirs.size(), n);
  EXPECT_LE(static_cast<double>(dirOpens), 1.1 * static_cast<double>(dirs.size()));
  EXPECT_GE(dirOpens, dirs.size());

  const std::vector<uint32_t> parent = {0, 0, 0, 1};
  std::string fingerprint;
  for (size_t i = 0; i < n; ++i) {
    const auto d = dataset(i);
    EXPECT_EQ(d.value("namespace_source", ""), i == 0 ? "walk" : "peer") << i << d.dump();
    const auto x = d["namespace_exchange"];
    EXPECT_EQ(x.value("walker", 99u), 0u) << i << d.dump();
    EXPECT_EQ(x.value("from_member", 99u), parent[i]) << i << d.dump();
    EXPECT_GT(x.value("image_bytes", uint64_t{0}), 2000u * 20) << d.dump();
    const std::string fp = x.value("fingerprint", "");
    if (i == 0) fingerprint = fp;
    EXPECT_EQ(fp, fingerprint) << "node " << i << " serves another namespace";
  }
  ASSERT_TRUE(everyNodeSeesLive(static_cast<int>(n), std::chrono::seconds(15)));
  epochEverywhere(7);  // every byte checked through every node
}

// The walker killed mid-walk: node 1 (the next member) counts it out when its
// connection drops and walks; nodes 2 and 3 receive from node 1. The job
// walks less than twice.
TEST_F(NamespaceExchangeTest, WalkerKilledMidWalkTheNextMemberWalks) {
  const auto dirs = makeTree(160, 10);
  const size_t n = 4;
  // TEST-ONLY: 400 ms before each directory: a walk of ~4 s with 16 threads.
  setenv("EPOCHFS_TEST_WALK_DELAY_MS", "400", 1);
  nodeExtra_[0] = {"--no-supervisor"};  // one process: SIGKILL ends the member
  DirOpenCounter opens(dirs);
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    // The log is flushed late: started, then well into the walk (~4 s).
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (processesServing(root_ + "/mnt0").size() < 2 && Clock::now() < until) usleep(20000);
    usleep(1500000);
    for (pid_t pid : processesServing(root_ + "/mnt0")) killed = kill(pid, SIGKILL) == 0 || killed;
  });
  const auto results = startAtOnce(static_cast<int>(n), 64 << 20, {});
  killer.join();
  unsetenv("EPOCHFS_TEST_WALK_DELAY_MS");
  ASSERT_TRUE(killed) << "node 0 was not found walking";
  EXPECT_NE(results[0].exitCode, 0) << "node 0 mounted before it was killed";
  for (size_t i = 1; i < n; ++i) ASSERT_EQ(results[i].exitCode, 0) << i << results[i].describe();
  const uint64_t dirOpens = opens.take();
  std::printf("directory opens: %llu (one walk: %zu)\n", static_cast<unsigned long long>(dirOpens),
              dirs.size());
  EXPECT_LE(dirOpens, 2 * dirs.size());

  const auto d1 = dataset(1);
  EXPECT_EQ(d1.value("namespace_source", ""), "walk") << d1.dump();
  EXPECT_EQ(d1["namespace_exchange"]["counted_out"], nlohmann::json::array({0})) << d1.dump();
  for (size_t i = 2; i < n; ++i) {
    const auto d = dataset(i);
    EXPECT_EQ(d.value("namespace_source", ""), "peer") << d.dump();
    EXPECT_EQ(d["namespace_exchange"].value("walker", 99u), 1u) << d.dump();
  }
  mnts_.erase(mnts_.begin());  // node 0 is gone
  readEpoch(mnts_[2], 3);      // node 3: every byte right
}

}  // namespace
}  // namespace epochfs::itest
