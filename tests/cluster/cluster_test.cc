// Several epochfs daemons as separate processes on loopback (UCX_TLS=tcp, or
// shared memory), each with its own mountpoint and cache, over one source
// directory. Source opens are counted outside the daemons with inotify.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {
namespace {

using Clock = std::chrono::steady_clock;

uint16_t freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Counts IN_OPEN of regular files in the watched directories.
class OpenCounter {
 public:
  explicit OpenCounter(const std::vector<std::string>& dirs) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    for (const auto& d : dirs) wd_[inotify_add_watch(fd_, d.c_str(), IN_OPEN)] = d;
  }
  ~OpenCounter() { close(fd_); }
  // Opens per file since the last call (relative to the source root `root`).
  std::map<std::string, int> take(const std::string& root) {
    std::map<std::string, int> out;
    alignas(inotify_event) char buf[65536];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) {
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        if (!(ev->mask & IN_ISDIR) && ev->len > 0) {
          std::string dir = wd_[ev->wd].substr(root.size());
          if (!dir.empty() && dir[0] == '/') dir.erase(0, 1);
          std::string name = dir;
          if (!name.empty()) name += '/';
          name.append(ev->name);
          out[name]++;
        }
        p += sizeof(inotify_event) + ev->len;
      }
    }
    return out;
  }

 private:
  int fd_;
  std::map<int, std::string> wd_;
};

class ClusterMountTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped()) return;
    setenv("UCX_TLS", "tcp", 1);
    secret_ = root_ + "/secret";
    writeFile(secret_, "cluster-test-secret-0123456789", 0600);
  }
  void TearDown() override {
    for (pid_t p : stopped_) kill(p, SIGCONT);
    MountTest::TearDown();
  }

  // Files of at most one chunk, in a few class directories.
  void makeDataset(int files) {
    for (int c = 0; c < 4; ++c) mkdirs(src_ + "/class" + std::to_string(c));
    for (int i = 0; i < files; ++i) {
      const std::string rel = "class" + std::to_string(i % 4) + "/img" + std::to_string(i) + ".bin";
      writeFile(src_ + "/" + rel, randomBytes(60000 + static_cast<size_t>(i * 7919) % 140000, i + 1));
      hashes_[rel] = xxh3(randomBytes(60000 + static_cast<size_t>(i * 7919) % 140000, i + 1));
    }
  }

  // Starts n daemons; returns false if they do not all see each other. A
  // port picked free can be taken before a daemon binds it (another process
  // on this machine): then the started daemons are unmounted and the cluster
  // is started again on fresh ports.
  bool startCluster(int n, uint64_t ramBytes, const std::vector<std::string>& extra = {},
                    int wrongSecretNode = -1) {
    for (int attempt = 1;; ++attempt) {
      bool portTaken = false;
      if (startClusterOnce(n, ramBytes, extra, wrongSecretNode, attempt < 3, &portTaken)) {
        return true;
      }
      if (!portTaken) return false;
      for (const auto& m : mnts_) unmount(m);
      mnts_.clear();
    }
  }

  bool startClusterOnce(int n, uint64_t ramBytes, const std::vector<std::string>& extra,
                        int wrongSecretNode, bool mayRetry, bool* portTaken) {
    std::string peers;
    ports_.clear();
    for (int i = 0; i < n; ++i) {
      ports_.push_back(freePort());
      if (i > 0) peers += ',';
      peers += "127.0.0.1:";
      peers += std::to_string(ports_.back());
    }
    const std::string wrong = root_ + "/wrong-secret";
    writeFile(wrong, "another-jobs-secret-9876543210", 0600);
    for (int i = 0; i < n; ++i) {
      const std::string mnt = root_ + "/mnt" + std::to_string(i);
      const std::string cache = root_ + "/cache" + std::to_string(i);
      mkdirs(mnt);
      mkdirs(cache);
      std::vector<std::string> args = {"--peers", peers, "--listen",
                                       "127.0.0.1:" + std::to_string(ports_[i]), "--secret-file",
                                       i == wrongSecretNode ? wrong : secret_, "--ram-cache",
                                       std::to_string(ramBytes), "--log-level", "info",
                                       "--log-file", root_ + "/log" + std::to_string(i),
                                       "--prefetch-window", "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      ProcResult r = mountAt(src_, mnt, args);
      if (r.exitCode != 0) {
        *portTaken = r.describe().find("cannot listen") != std::string::npos;
        if (!(*portTaken && mayRetry)) ADD_FAILURE() << "node " << i << ": " << r.describe();
        return false;
      }
      mnts_.push_back(mnt);
    }
    if (wrongSecretNode >= 0) return true;
    const auto until = Clock::now() + std::chrono::seconds(15);
    for (const auto& m : mnts_) {
      for (;;) {
        auto j = admin("peers", m);
        int live = 0;
        for (const auto& p : j.value("peers", nlohmann::json::array())) live += p.value("live", false);
        if (live == n) break;
        if (Clock::now() > until) {
          ADD_FAILURE() << m << " does not see every peer: " << j.dump();
          return false;
        }
        usleep(50000);
      }
    }
    return true;
  }

  // Reads every file through `mnt` in a shuffled order; checks every byte.
  void readEpoch(const std::string& mnt, uint64_t seed, double* slowest = nullptr,
                 const std::function<void(size_t)>& before = nullptr) {
    std::vector<std::string> files;
    for (const auto& [rel, h] : hashes_) files.push_back(rel);
    std::shuffle(files.begin(), files.end(), std::mt19937_64(seed));
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string& rel = files[i];
      if (before) before(i);
      const auto t0 = Clock::now();
      ReadResult r = readFile(mnt + "/" + rel);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (slowest) *slowest = std::max(*slowest, s);
      EXPECT_EQ(r.err, 0) << mnt << "/" << rel;
      EXPECT_EQ(xxh3(r.data), hashes_[rel]) << mnt << "/" << rel << " differs";
    }
  }

  void epochEverywhere(uint64_t seed) {
    std::vector<std::thread> ts;
    for (size_t i = 0; i < mnts_.size(); ++i) {
      ts.emplace_back([this, i, seed] { readEpoch(mnts_[i], seed + i); });
    }
    for (auto& t : ts) t.join();
  }

  std::vector<std::string> sourceDirs() {
    std::vector<std::string> d = {src_};
    for (int c = 0; c < 4; ++c) d.push_back(src_ + "/class" + std::to_string(c));
    return d;
  }

  uint64_t datasetBytes() const { return treeBytes(src_); }

  void runOnceEpochs(int n, const std::vector<std::string>& extra) {
    makeDataset(120);
    // Each node's RAM tier holds about 1/3 of the dataset (N=4), a bit more
    // than its share for N=3: the cluster holds it, no node alone does.
    const uint64_t ram = datasetBytes() * (n == 4 ? 36 : 45) / 100;
    ASSERT_TRUE(startCluster(n, ram, extra));
    OpenCounter opens(sourceDirs());
    epochEverywhere(1);
    auto e1 = opens.take(src_);
    EXPECT_EQ(e1.size(), hashes_.size()) << "files opened in epoch 1";
    for (const auto& [f, c] : e1) EXPECT_EQ(c, 1) << f << " opened " << c << " times in epoch 1";
    uint64_t peerBytes = 0, readBytes = 0;
    for (const auto& m : mnts_) {
      auto s = stats(m);
      peerBytes += counter(s, "peer.bytes").value_or(0);
      const auto j = admin("peers", m);
      for (const auto& p : j["peers"]) readBytes += p.value("bytes_fetched", uint64_t{0});
    }
    std::printf("epoch 1: %zu files opened once; %.1f MiB fetched from peers in all\n", e1.size(),
                static_cast<double>(readBytes) / 1048576.0);
    // Each node reads (n-1)/n of the dataset from the others, give or take
    // the hash's unevenness.
    const double expected = static_cast<double>(datasetBytes()) * (n - 1);
    EXPECT_GT(static_cast<double>(readBytes), 0.8 * expected);
    EXPECT_LT(static_cast<double>(readBytes), 1.05 * expected);
    for (int epoch = 2; epoch <= 3; ++epoch) {
      ASSERT_TRUE(dropPageCache());
      epochEverywhere(static_cast<uint64_t>(epoch) * 100);
      auto e = opens.take(src_);
      EXPECT_TRUE(e.empty()) << e.size() << " source files opened in epoch " << epoch << ", e.g. "
                             << (e.empty() ? "" : e.begin()->first);
    }
    (void)peerBytes;
  }

  std::string secret_;
  std::vector<uint16_t> ports_;
  std::vector<std::string> mnts_;
  std::map<std::string, uint64_t> hashes_;
  std::vector<pid_t> stopped_;
};

TEST_F(ClusterMountTest, ThreeNodesReadEachFileOnceOverTcp) { runOnceEpochs(3, {}); }

TEST_F(ClusterMountTest, FourNodesReadEachFileOnceOverTcp) { runOnceEpochs(4, {}); }

TEST_F(ClusterMountTest, FourNodesOverSharedMemory) {
  setenv("UCX_TLS", "sm,self,tcp", 1);  // tcp for the connection manager only
  runOnceEpochs(4, {});
}

TEST_F(ClusterMountTest, ChecksumIntegrityMode) { runOnceEpochs(3, {"--peer-integrity", "checksum"}); }

TEST_F(ClusterMountTest, WrongSecretIsRefused) {
  makeDataset(40);
  ASSERT_TRUE(startCluster(3, 64 << 20, {}, /*wrongSecretNode=*/2));
  sleep(2);
  for (int i = 0; i < 3; ++i) {
    auto j = admin("peers", mnts_[static_cast<size_t>(i)]);
    for (const auto& p : j["peers"]) {
      const int id = p.value("id", -1);
      if (id == i) continue;
      const bool involvesIntruder = i == 2 || id == 2;
      EXPECT_EQ(p.value("live", false), !involvesIntruder) << "node " << i << ": " << p.dump();
      if (involvesIntruder) {
        EXPECT_GT(p.value("auth_failures", 0), 0) << "node " << i << ": " << p.dump();
      }
    }
  }
  // Everyone still reads the right bytes (the intruder from the source).
  epochEverywhere(7);
  for (int i = 0; i < 3; ++i) {
    auto j = admin("peers", mnts_[static_cast<size_t>(i)]);
    for (const auto& p : j["peers"]) {
      if (i == 2 || p.value("id", -1) == 2) {
        EXPECT_EQ(p.value("bytes_served", 0), 0);
        EXPECT_EQ(p.value("bytes_fetched", 0), 0);
      }
    }
  }
  std::ifstream log(root_ + "/log0");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("failed authentication"), std::string::npos) << text;
}

TEST_F(ClusterMountTest, KilledAndFrozenPeersLoseNoRead) {
  makeDataset(120);
  const double deadline = 1.0;
  // RAM for a third of the data: later epochs need the owners again.
  // --no-supervisor: the killed peer must stay dead (a supervisor would
  // restart it; tests/fault/supervisor_test.cc covers that).
  ASSERT_TRUE(startCluster(4, datasetBytes() / 3, {"--peer-timeout", "1000", "--no-supervisor"}));
  const pid_t victim = daemonPid(mnts_[3]), frozen = daemonPid(mnts_[2]);
  ASSERT_GT(victim, 0);
  ASSERT_GT(frozen, 0);
  double slowest0 = 0, slowest1 = 0;
  std::atomic<bool> struck{false};
  std::thread other([&] {
    while (!struck) usleep(1000);
    readEpoch(mnts_[1], 11, &slowest1);
  });
  readEpoch(mnts_[0], 10, &slowest0, [&](size_t i) {
    if (i == 40) {  // mid-epoch
      kill(victim, SIGKILL);
      kill(frozen, SIGSTOP);
      stopped_.push_back(frozen);
      struck = true;
    }
  });
  other.join();
  // Another epoch with both still gone.
  ASSERT_TRUE(dropPageCache());
  readEpoch(mnts_[0], 12, &slowest0);
  std::printf("slowest read: %.2f s (node 0), %.2f s (node 1)\n", slowest0, slowest1);
  // No read hangs beyond the deadline plus the source's time (a hang
  // detector, not a speed test).
  EXPECT_LT(std::max(slowest0, slowest1), deadline + 3.0);
  auto j = admin("peers", mnts_[0]);
  std::printf("%s\n", j.dump().c_str());
  EXPECT_FALSE(j["peers"][3].value("live", true));
  EXPECT_FALSE(j["peers"][2].value("live", true));
  kill(frozen, SIGCONT);
  // The frozen node answers again and rejoins.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!admin("peers", mnts_[0])["peers"][2].value("live", false) && Clock::now() < until) {
    usleep(100000);
  }
  EXPECT_TRUE(admin("peers", mnts_[0])["peers"][2].value("live", false));
  readEpoch(mnts_[1], 13, &slowest1);
  // The killed node's mount is dead (ENOTCONN); TearDown unmounts it.
  waitForExit(victim, 5);
}

}  // namespace
}  // namespace epochfs::itest
