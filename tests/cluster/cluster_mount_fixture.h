// ClusterMountTest: several epochfs daemons as separate processes on
// loopback (UCX_TLS=tcp), each with its own mountpoint and cache, over one
// source directory (or one per node, nodeSource_). Shared by cluster_tests
// and peer_fault_tests. Source opens are counted outside the daemons with inotify.
#pragma once

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
#include "tests/loopback_port.h"

namespace epochfs::itest {

using Clock = std::chrono::steady_clock;

using test_support::freeLoopbackPort;

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
      writeFile(src_ + "/" + rel,
                randomBytes(60000 + static_cast<size_t>(i * 7919) % 140000, i + 1));
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
    const std::string peers = pickPorts(n);
    const std::string wrong = root_ + "/wrong-secret";
    writeFile(wrong, "another-jobs-secret-9876543210", 0600);
    for (int i = 0; i < n; ++i) {
      const std::string mnt = root_ + "/mnt" + std::to_string(i);
      const std::string cache = root_ + "/cache" + std::to_string(i);
      mkdirs(mnt);
      mkdirs(cache);
      const auto args = nodeArgs(i, peers, i == wrongSecretNode ? wrong : secret_,
                                 nodeRam_.count(i) ? nodeRam_[i] : ramBytes, extra);
      // TEST-ONLY fault hook for one node: the daemon reads it at start.
      if (i == faultNode_) setenv("EPOCHFS_FAULT_PEER_FLIP", faultSpec_.c_str(), 1);
      auto srcIt = nodeSource_.find(i);
      ProcResult r = mountAt(srcIt == nodeSource_.end() ? src_ : srcIt->second, mnt, args);
      unsetenv("EPOCHFS_FAULT_PEER_FLIP");
      if (r.exitCode != 0) {
        *portTaken = r.describe().find("cannot listen") != std::string::npos;
        if (!(*portTaken && mayRetry)) ADD_FAILURE() << "node " << i << ": " << r.describe();
        return false;
      }
      mnts_.push_back(mnt);
    }
    if (wrongSecretNode >= 0) return true;
    return everyNodeSeesLive(n, std::chrono::seconds(15));
  }

  // Fresh loopback ports for n members (ports_); returns the --peers list.
  std::string pickPorts(int n) {
    std::string peers;
    ports_.clear();
    for (int i = 0; i < n; ++i) {
      ports_.push_back(freeLoopbackPort());
      if (i > 0) peers += ',';
      peers += "127.0.0.1:";
      peers += std::to_string(ports_.back());
    }
    return peers;
  }

  // Node i's options: the members, its listen address, the secret file, its
  // RAM tier, its log, then `extra` and nodeExtra_[i].
  std::vector<std::string> nodeArgs(int i, const std::string& peers, const std::string& secret,
                                    uint64_t ramBytes, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--peers",           peers,  "--listen",    "127.0.0.1:" + std::to_string(ports_[i]),
        "--secret-file",     secret, "--ram-cache", std::to_string(ramBytes),
        "--log-level",       "info", "--log-file",  root_ + "/log" + std::to_string(i),
        "--prefetch-window", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    if (auto it = nodeExtra_.find(i); it != nodeExtra_.end()) {
      args.insert(args.end(), it->second.begin(), it->second.end());
    }
    return args;
  }

  // Waits until every mount sees `n` members live; false (and a failure
  // naming the mount) after `timeout`.
  bool everyNodeSeesLive(int n, std::chrono::seconds timeout) {
    const auto until = Clock::now() + timeout;
    for (const auto& m : mnts_) {
      for (;;) {
        auto j = admin("peers", m);
        int live = 0;
        for (const auto& p : j.value("peers", nlohmann::json::array()))
          live += p.value("live", false);
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
      ReadResult r = readFile(mnt + "/" + rel, readBuffer_);
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
  int faultNode_ = -1;  // this node gets EPOCHFS_FAULT_PEER_FLIP=faultSpec_
  std::string faultSpec_;
  std::map<int, std::string> nodeSource_;  // a node's own source dir (default src_)
  // readEpoch's read() size; with 32 KiB (as sha1sum) the kernel sends a file
  // larger than 128 KiB to the daemon as several READs.
  size_t readBuffer_ = 128 * 1024;
  std::map<int, uint64_t> nodeRam_;  // a node's own --ram-cache (default: startCluster's)
  std::map<int, std::vector<std::string>> nodeExtra_;  // options for one node only
  std::vector<uint16_t> ports_;
  std::vector<std::string> mnts_;
  std::map<std::string, uint64_t> hashes_;
  std::vector<pid_t> stopped_;
};

}  // namespace epochfs::itest
