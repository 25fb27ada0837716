// The shared node daemon (docs/ARCHITECTURE.md): `epochfs SRC MNT2` while a
// daemon of the same user already serves SRC with the same daemon options
// mounts MNT2 in that daemon (one more FUSE session, one cache) and exits 0;
// `--own-daemon` or other daemon options get a daemon of their own. Label
// `fault`: the shared daemon survives a killed worker and the unmount of the
// mount that started it. Real mounts through tests/integration/mount_fixture.h
// (TearDown unmounts everything under the test's temp dir); what a test
// counts it counts from outside the daemon (inotify on the source,
// /proc/PID/io, /proc/PID/status). Each test states its pass criterion above it.
#include <fcntl.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/fault/reader_pool.h"
#include "tests/integration/mount_fixture.h"

// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3.
#pragma GCC diagnostic ignored "-Wrestrict"

namespace epochfs::itest {
namespace {

void sleepFor(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string exePath(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

// The epochfs processes behind a worker: the worker and, when it runs the
// same binary, its parent (the supervisor).
std::vector<pid_t> daemonProcesses(pid_t worker) {
  std::vector<pid_t> out{worker};
  const pid_t parent = parentOf(worker);
  if (parent > 1 && parent != getpid() && exePath(parent) == exePath(worker)) {
    out.push_back(parent);
  }
  return out;
}

// Resident memory of `pids`: the sum of their VmRSS (which includes RssShmem).
uint64_t residentBytes(const std::vector<pid_t>& pids) {
  uint64_t total = 0;
  for (pid_t pid : pids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) total += std::stoull(line.substr(6)) * 1024;
    }
  }
  return total;
}

// A mount's path as the daemon may report it (symlinks in TMPDIR resolved).
std::string canonical(const std::string& path) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(path, ec);
  return ec ? path : real.string();
}

// IN_OPEN on every directory of the source, counted per path ("dir/" for a
// directory's own events); inotify merges identical consecutive events, so a
// count is a lower bound.
class SourceOpens {
 public:
  explicit SourceOpens(const std::string& src) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    EXPECT_GE(fd_, 0) << strerror(errno);
    for (const auto& [rel, e] : snapshotTree(src, false)) {
      if (!S_ISDIR(e.mode)) continue;
      const std::string dir = rel == "." ? src : src + "/" + rel;
      const int wd = inotify_add_watch(fd_, dir.c_str(), IN_OPEN);
      EXPECT_GE(wd, 0) << dir << ": " << strerror(errno);
      prefix_[wd] = rel == "." ? "" : rel + "/";
    }
  }
  ~SourceOpens() { close(fd_); }
  // The opens queued since the last call; "(overflow)" if events were lost.
  std::map<std::string, uint64_t> take() {
    std::map<std::string, uint64_t> opens;
    alignas(inotify_event) char buf[64 * 1024];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) {
      for (char* p = buf; p < buf + n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if ((ev->mask & IN_Q_OVERFLOW) != 0) {
          opens["(overflow)"]++;
        } else if ((ev->mask & IN_OPEN) != 0) {
          std::string path = prefix_[ev->wd];
          if (ev->len > 0) path += ev->name;
          if ((ev->mask & IN_ISDIR) != 0 && ev->len > 0) path += "/";
          opens[path.empty() ? "./" : path]++;
        }
      }
    }
    return opens;
  }

 private:
  int fd_ = -1;
  std::map<int, std::string> prefix_;
};

std::string firstKeys(const std::map<std::string, uint64_t>& m) {
  std::string s;
  int shown = 0;
  for (const auto& [k, v] : m) {
    if (shown++ == 10) break;
    s += k;
    if (v > 1) s += " x" + std::to_string(v);
    s += "; ";
  }
  return s;
}

// 2,000 files in 10 class directories, sizes log-normal around 110 KB (about
// a third above 128 KiB), bytes from a fixed seed.
struct ClassDataset {
  std::vector<std::string> files;
  std::map<std::string, uint64_t> hash;
  uint64_t bytes = 0;
};

ClassDataset writeClassDataset(const std::string& src) {
  ClassDataset ds;
  std::mt19937_64 rng(20240611);
  std::lognormal_distribution<double> size(std::log(110000.0), 0.35);
  for (int c = 0; c < 10; ++c) {
    const std::string dir = "class" + std::to_string(c);
    mkdirs(src + "/" + dir);
    for (int i = 0; i < 200; ++i) {
      const auto n = static_cast<size_t>(std::clamp(size(rng), 4096.0, 1048576.0));
      const std::string rel = dir + "/img" + std::to_string(i) + ".jpg";
      const std::string data = randomBytes(n, 7919 * c + i);
      writeFile(src + "/" + rel, data);
      ds.files.push_back(rel);
      ds.hash[rel] = xxh3(data);
      ds.bytes += n;
    }
  }
  return ds;
}

// One epoch: every mount is read in full by 4 threads, in a shuffled order of
// its own (seeded by `seed` and the mount), all mounts at once; returns the
// files whose read failed or whose bytes differ from the source's.
std::vector<std::string> readEpoch(const ClassDataset& ds, const std::vector<std::string>& mounts,
                                   uint64_t seed) {
  std::mutex mu;
  std::vector<std::string> bad;
  std::vector<std::vector<std::string>> orders(mounts.size(), ds.files);
  std::vector<std::atomic<size_t>> next(mounts.size());
  std::vector<std::thread> threads;
  for (size_t m = 0; m < mounts.size(); ++m) {
    std::mt19937_64 rng(seed * 100 + m);
    std::shuffle(orders[m].begin(), orders[m].end(), rng);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, m] {
        for (size_t i = next[m]++; i < orders[m].size(); i = next[m]++) {
          const std::string& rel = orders[m][i];
          const ReadResult r = readFile(mounts[m] + "/" + rel);
          if (r.err == 0 && xxh3(r.data) == ds.hash.at(rel)) continue;
          std::lock_guard<std::mutex> lock(mu);
          bad.push_back(mounts[m] + "/" + rel + ": " +
                        (r.err != 0 ? strerror(r.err) : "wrong bytes"));
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  return bad;
}

// Unmounts what a test mounted itself (not through the fixture) if the test
// stops early.
struct UnmountAtExit {
  std::vector<std::string> paths;
  ~UnmountAtExit() {
    for (const auto& p : paths) {
      if (isMounted(p)) unmountPath(p);
    }
  }
};

class SharedDaemonTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    writeFile(src_ + "/hello.bin", hello_);
  }

  // A fresh, empty mountpoint under the test's temp dir.
  std::string mountpoint(const std::string& name) {
    const std::string path = root_ + "/" + name;
    mkdirs(path);
    return path;
  }

  // The mountpoints the daemon behind `mnt` says it serves (admin status "mounts").
  std::set<std::string> servedMounts(const std::string& mnt) {
    std::set<std::string> out;
    const auto st = admin("status", mnt);
    for (const auto& m : st.value("mounts", nlohmann::json::array())) {
      if (m.is_string()) out.insert(canonical(m.get<std::string>()));
    }
    return out;
  }

  // Waits for a worker other than `old` to answer status on `mnt`; -1 on timeout.
  pid_t waitWorkerOtherThan(pid_t old, const std::string& mnt, double timeoutSec) {
    const auto t0 = Clock::now();
    for (;;) {
      const pid_t pid = daemonPid(mnt);
      if (pid > 0 && pid != old) return pid;
      if (since(t0) > timeoutSec) return -1;
      sleepFor(20);
    }
  }

  const std::string hello_ = randomBytes(300 * 1000, 42);
};

// Pass: 4 mounts of one source with the same options are served by one
// daemon (one pid; its status lists the 4 mountpoints). With all 4 read at
// once (16 threads, each mount in its own shuffled order) every byte is right
// in all 3 epochs; epoch 1 opens every source file (inotify IN_OPEN) and the
// worker reads at most 1.05x the dataset's bytes (/proc/PID/io rchar);
// epochs 2 and 3, after dropping the page cache, open nothing in the source;
// afterwards the epochfs processes' resident memory (VmRSS of worker and
// supervisor) is at most 1.15x that of one mount alone after one full read.
TEST_F(SharedDaemonTest, FourMountsReadTheSourceOnce) {
  const ClassDataset ds = writeClassDataset(src_);
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<std::string> opts = {"--ram-cache", "1G", "--prefetch-window", "0"};

  // Baseline: one mount alone, every file read once.
  const std::string solo = mountpoint("solo");
  auto r = mountAt(src_, solo, opts);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const pid_t soloWorker = daemonPid(solo);
  ASSERT_GT(soloWorker, 0);
  const auto soloProcs = daemonProcesses(soloWorker);
  dropCaches(solo);
  const auto soloBad = readEpoch(ds, {solo}, 1);
  ASSERT_TRUE(soloBad.empty()) << soloBad.size() << " bad reads, first " << soloBad.front();
  const uint64_t baseline = residentBytes(soloProcs);
  ASSERT_GT(baseline, 0u);
  ASSERT_TRUE(unmount(solo));
  for (pid_t p : soloProcs) {
    ASSERT_TRUE(waitForExit(p, 10).has_value()) << "process " << p << " outlived the solo mount";
  }

  const std::vector<std::string> mounts = {mnt_, mountpoint("mnt2"), mountpoint("mnt3"),
                                           mountpoint("mnt4")};
  for (const auto& m : mounts) {
    r = mountAt(src_, m, opts);
    ASSERT_EQ(r.exitCode, 0) << m << ": " << r.describe();
  }
  const pid_t worker = daemonPid(mnt_);
  ASSERT_GT(worker, 0);
  for (const auto& m : mounts) EXPECT_EQ(daemonPid(m), worker) << m << " has a daemon of its own";
  std::set<std::string> want;
  for (const auto& m : mounts) want.insert(canonical(m));
  EXPECT_EQ(servedMounts(mnt_), want);
  const auto procs = daemonProcesses(worker);

  SourceOpens opens(src_);
  for (int epoch = 1; epoch <= 3; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    dropCaches();
    opens.take();  // whatever dropping the caches opened
    const auto io0 = procIo(worker);
    const auto bad = readEpoch(ds, mounts, 10 + epoch);
    const auto io1 = procIo(worker);
    auto seen = opens.take();
    ASSERT_TRUE(io0.count("rchar") != 0 && io1.count("rchar") != 0) << "no /proc/PID/io";
    EXPECT_TRUE(bad.empty()) << bad.size() << " bad reads, first " << bad.front();
    EXPECT_EQ(seen.count("(overflow)"), 0u) << "inotify queue overflowed";
    if (epoch == 1) {
      std::map<std::string, uint64_t> unopened;
      for (const auto& f : ds.files) {
        if (seen.count(f) == 0) unopened[f] = 0;
      }
      EXPECT_TRUE(unopened.empty())
          << unopened.size() << " source files never opened, e.g. " << firstKeys(unopened);
      const uint64_t rchar = io1.at("rchar") - io0.at("rchar");
      RecordProperty("epoch1_worker_rchar", std::to_string(rchar));
      RecordProperty("dataset_bytes", std::to_string(ds.bytes));
      EXPECT_LE(static_cast<double>(rchar), 1.05 * static_cast<double>(ds.bytes))
          << "the worker read " << rchar << " bytes for a " << ds.bytes
          << "-byte dataset read through 4 mounts";
    } else {
      EXPECT_TRUE(seen.empty()) << seen.size() << " source paths opened, e.g. " << firstKeys(seen);
    }
  }
  const uint64_t resident = residentBytes(procs);
  RecordProperty("resident_bytes_one_mount", std::to_string(baseline));
  RecordProperty("resident_bytes_four_mounts", std::to_string(resident));
  EXPECT_LE(static_cast<double>(resident), 1.15 * static_cast<double>(baseline))
      << "4 mounts: " << resident << " bytes resident, one mount alone: " << baseline;
}

// Pass: in each of 3 rounds, two `epochfs SRC MNT` commands for two
// mountpoints released at the same moment both exit 0 and leave both
// mounted, served by one daemon (the same status pid), each reading a file
// right; unmounting one leaves the daemon serving the other; unmounting both
// ends the worker and its supervisor (within 10 s) before the next round.
TEST_F(SharedDaemonTest, SimultaneousStartsMakeOneDaemon) {
  const std::string bin = epochfsBinary();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string tag = std::to_string(round);
    const std::array<std::string, 2> mnts = {mountpoint("race" + tag + "a"),
                                             mountpoint("race" + tag + "b")};
    UnmountAtExit cleanup{{mnts[0], mnts[1]}};
    std::array<ProcResult, 2> res;
    std::latch go(3);
    std::vector<std::thread> starters;
    for (size_t i = 0; i < 2; ++i) {
      starters.emplace_back([&, i] {
        go.arrive_and_wait();
        res[i] = runProcess({bin, src_, mnts[i]}, 60);
      });
    }
    go.arrive_and_wait();
    for (auto& t : starters) t.join();
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(res[i].exitCode, 0) << mnts[i] << ": " << res[i].describe();
      ASSERT_TRUE(isMounted(mnts[i])) << mnts[i];
    }
    const pid_t worker = daemonPid(mnts[0]);
    ASSERT_GT(worker, 0);
    const pid_t other = daemonPid(mnts[1]);
    EXPECT_EQ(other, worker) << "two daemons for one source";
    std::vector<pid_t> procs = daemonProcesses(worker);
    if (other > 0 && other != worker) {
      for (pid_t p : daemonProcesses(other)) procs.push_back(p);
    }
    for (const auto& m : mnts) EXPECT_TRUE(readFile(m + "/hello.bin").data == hello_) << m;

    ASSERT_TRUE(unmountPath(mnts[0]));
    EXPECT_EQ(daemonPid(mnts[1]), other) << "the daemon did not outlive one of its two mounts";
    EXPECT_TRUE(readFile(mnts[1] + "/hello.bin").data == hello_);
    ASSERT_TRUE(unmountPath(mnts[1]));
    for (pid_t p : procs) {
      EXPECT_TRUE(waitForExit(p, 10).has_value()) << "process " << p << " outlived its mounts";
    }
  }
}

// Pass: one founding and two joined mounts, 4 verifying readers on each
// (reads keep reaching the source: 4M RAM tier, 20 ms source latency). After
// SIGKILL of the worker a new worker (new pid, same supervisor) answers on
// every mount and every reader completes another full pass; after the
// founding mount is unmounted the daemon keeps serving the other two, whose
// readers complete 2 more passes. No read fails or returns wrong bytes.
// Unmounting the last two ends worker and supervisor within 10 s and leaves
// nothing mounted.
TEST_F(SharedDaemonTest, JoinedMountsSurviveWorkerKillAndFounderUnmount) {
  // Multi-chunk (2.5 MB) and single-chunk files in 4 directories.
  std::map<std::string, std::string> files;
  for (int d = 0; d < 4; ++d) {
    const std::string dir = "part" + std::to_string(d);
    mkdirs(src_ + "/" + dir);
    for (int i = 0; i < 9; ++i) {
      const size_t bytes = i % 3 == 0 ? 2500 * 1000 + i : 60 * 1000 + 13 * i;
      const std::string name = dir + "/s" + std::to_string(i) + ".dat";
      files[name] = randomBytes(bytes, 500 + 10 * d + i);
      writeFile(src_ + "/" + name, files[name]);
    }
  }
  const std::vector<std::string> opts = {"--ram-cache", "4M", "--inject-source-latency", "20"};
  const std::vector<std::string> mounts = {mnt_, mountpoint("mnt2"), mountpoint("mnt3")};
  for (const auto& m : mounts) {
    auto r = mountAt(src_, m, opts);
    ASSERT_EQ(r.exitCode, 0) << m << ": " << r.describe();
  }
  const pid_t worker = daemonPid(mnt_);
  ASSERT_GT(worker, 0);
  for (const auto& m : mounts) ASSERT_EQ(daemonPid(m), worker) << m << " has a daemon of its own";
  const pid_t supervisor = parentOf(worker);
  ASSERT_GT(supervisor, 1);

  dropCaches();
  std::vector<std::unique_ptr<ReaderPool>> pools;
  for (const auto& m : mounts) pools.push_back(std::make_unique<ReaderPool>(m, files, 4));
  // Polls `done` for up to timeoutSec; on a hang kills the daemon so that
  // blocked readers return and the test can end.
  auto within = [&](double timeoutSec, const std::function<bool()>& done) {
    const auto t0 = Clock::now();
    while (!done() && since(t0) < timeoutSec) sleepFor(50);
    if (done()) return true;
    abortConnection(supervisor);
    return false;
  };
  auto allPassed = [&](const std::vector<uint64_t>& base, size_t from, uint64_t more) {
    for (size_t i = from; i < pools.size(); ++i) {
      if (!pools[i]->passesDone(base[i] + more)) return false;
    }
    return true;
  };
  auto minPasses = [&] {
    std::vector<uint64_t> base(pools.size());
    for (size_t i = 0; i < pools.size(); ++i) base[i] = pools[i]->minPasses();
    return base;
  };
  ASSERT_TRUE(within(30, [&] {
    return std::all_of(pools.begin(), pools.end(), [](const auto& p) { return p->reads() > 0; });
  })) << "no reads on some mount in 30 s";

  ASSERT_EQ(kill(worker, SIGKILL), 0);
  const pid_t next = waitWorkerOtherThan(worker, mounts[1], 30);
  if (next <= 0) abortConnection(supervisor);
  ASSERT_GT(next, 0) << "no new worker answered on " << mounts[1] << " within 30 s";
  EXPECT_EQ(parentOf(next), supervisor);
  for (const auto& m : mounts) {
    EXPECT_TRUE(isMounted(m)) << m;
    EXPECT_EQ(daemonPid(m), next) << m << " is not served by the new worker";
  }
  auto base = minPasses();
  ASSERT_TRUE(within(120, [&] { return allPassed(base, 0, 1); }))
      << "readers hung after the worker restart";

  // The founding mount goes; the other two keep being served.
  pools[0]->stopAndJoin();
  ASSERT_TRUE(unmount(mnt_));
  EXPECT_EQ(daemonPid(mounts[1]), next) << "the worker did not outlive the founding mount";
  base = minPasses();
  ASSERT_TRUE(within(120, [&] { return allPassed(base, 1, 2); }))
      << "readers on the joined mounts hung after the founding mount's unmount";
  EXPECT_EQ(servedMounts(mounts[1]),
            (std::set<std::string>{canonical(mounts[1]), canonical(mounts[2])}));
  for (auto& p : pools) p->stopAndJoin();
  for (size_t i = 0; i < pools.size(); ++i) {
    for (const auto& f : pools[i]->failures()) ADD_FAILURE() << mounts[i] << ": " << f;
  }
  pools.clear();

  ASSERT_TRUE(unmount(mounts[1]));
  EXPECT_EQ(daemonPid(mounts[2]), next) << "the worker did not outlive the second mount";
  ASSERT_TRUE(unmount(mounts[2]));
  const bool supervisorEnded = waitForExit(supervisor, 10).has_value();
  const bool workerEnded = waitForExit(next, 10).has_value();
  if (!supervisorEnded || !workerEnded) abortConnection(supervisor);
  EXPECT_TRUE(supervisorEnded) << "supervisor outlived its last mount";
  EXPECT_TRUE(workerEnded) << "worker outlived its last mount";
  EXPECT_TRUE(mountPointsUnder(root_).empty());
}

// Pass: a mount with other daemon options (--ram-cache 32M against 64M), one
// with --push-page-cache and one with --own-daemon each get a daemon of their
// own (4 different pids) and exit 0; the first two say so in exactly one
// "epochfs: ... own daemon: REASON" stderr line, the last prints nothing; all
// four read a file right.
TEST_F(SharedDaemonTest, OtherOptionsOrOwnDaemonGetTheirOwnDaemon) {
  auto r = mount({"--ram-cache", "64M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const pid_t founder = daemonPid();
  ASSERT_GT(founder, 0);

  const std::string other = mountpoint("other-options");
  r = mountAt(src_, other, {"--ram-cache", "32M"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(oneEpochfsLine(r, {"own daemon"})) << r.describe();
  const pid_t otherPid = daemonPid(other);
  EXPECT_GT(otherPid, 0);
  EXPECT_NE(otherPid, founder);

  const std::string pushing = mountpoint("push-page-cache");
  r = mountAt(src_, pushing, {"--ram-cache", "64M", "--push-page-cache", "on"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_TRUE(oneEpochfsLine(r, {"own daemon: --push-page-cache"})) << r.describe();
  const pid_t pushPid = daemonPid(pushing);
  EXPECT_GT(pushPid, 0);
  EXPECT_NE(pushPid, founder);
  EXPECT_NE(pushPid, otherPid);

  const std::string own = mountpoint("own-daemon");
  r = mountAt(src_, own, {"--ram-cache", "64M", "--own-daemon"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  const pid_t ownPid = daemonPid(own);
  EXPECT_GT(ownPid, 0);
  EXPECT_NE(ownPid, founder);
  EXPECT_NE(ownPid, otherPid);
  EXPECT_NE(ownPid, pushPid);

  for (const auto& m : {mnt_, other, pushing, own}) {
    EXPECT_TRUE(readFile(m + "/hello.bin").data == hello_) << m;
  }
}

}  // namespace
}  // namespace epochfs::itest
