// Readers that keep a mount busy while a fault test kills, restarts or
// unmounts its daemon (tests/fault/supervisor_test.cc, shared_daemon_test.cc),
// and the process helpers such tests need: parentOf (a worker's supervisor)
// and abortConnection (ends a hung mount so a failing test still ends).
//
// Threading: a ReaderPool owns its reader threads; passesDone, minPasses,
// reads, slowestSeconds and failures may be called from any thread while they
// run; stopAndJoin (also run by the destructor) from the owning thread only.
// The file map must outlive the pool and stay unchanged while it runs.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/integration/mount_fixture.h"

namespace epochfs::itest {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The parent pid of `pid` (/proc/PID/stat), -1 if it is gone.
inline pid_t parentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  if (close == std::string::npos) return -1;
  char state;
  int ppid = -1;
  if (std::sscanf(all.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// Ends a hung mount so a failing test still ends: SIGKILL to the supervisor
// and its workers closes every /dev/fuse descriptor, which aborts the
// connection (fusectl's abort file is not mounted everywhere).
inline void abortConnection(pid_t supervisor) {
  std::vector<pid_t> victims;
  if (supervisor > 1) {
    victims.push_back(supervisor);
    DIR* d = opendir("/proc");
    while (d != nullptr) {
      dirent* e = readdir(d);
      if (e == nullptr) break;
      const pid_t p = static_cast<pid_t>(std::atoi(e->d_name));
      if (p > 0 && parentOf(p) == supervisor) victims.push_back(p);
    }
    if (d != nullptr) closedir(d);
  }
  for (pid_t p : victims) kill(p, SIGKILL);
}

// Readers in 4 threads (passesDone and minPasses count four) loop over
// `files` (relative name -> bytes) and verify every byte of every read until
// stopped; they record every error, every wrong byte and the slowest single
// file read.
class ReaderPool {
 public:
  ReaderPool(std::string mnt, const std::map<std::string, std::string>& files, int threads)
      : mnt_(std::move(mnt)), files_(files) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t] { loop(t); });
    }
  }
  ~ReaderPool() { stopAndJoin(); }

  void stopAndJoin() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Every thread finished at least `n` full passes since construction.
  bool passesDone(uint64_t n) const {
    for (const auto& p : passes_) {
      if (p.load() < n) return false;
    }
    return true;
  }
  uint64_t minPasses() const {
    uint64_t m = UINT64_MAX;
    for (const auto& p : passes_) m = std::min<uint64_t>(m, p.load());
    return m;
  }
  std::vector<std::string> failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }
  uint64_t reads() const { return reads_.load(); }
  double slowestSeconds() const { return slowestMs_.load() / 1000.0; }

 private:
  void loop(int t) {
    std::vector<std::pair<std::string, const std::string*>> order;
    for (const auto& [name, data] : files_) order.emplace_back(name, &data);
    // Each thread starts elsewhere in the list so reads overlap different files.
    std::rotate(order.begin(), order.begin() + (order.size() * t / 4) % order.size(), order.end());
    while (!stop_) {
      for (const auto& [name, want] : order) {
        if (stop_) return;
        const auto t0 = Clock::now();
        ReadResult r = readFile(mnt_ + "/" + name, 256 * 1024);
        const auto ms = static_cast<uint64_t>(since(t0) * 1000);
        uint64_t prev = slowestMs_.load();
        while (ms > prev && !slowestMs_.compare_exchange_weak(prev, ms)) {
        }
        reads_.fetch_add(1);
        if (r.err != 0 || r.data != *want) {
          std::lock_guard<std::mutex> lock(mu_);
          if (failures_.size() < 20) {
            failures_.push_back(name + ": " +
                                (r.err != 0 ? std::string(strerror(r.err))
                                            : "WRONG BYTES (" + std::to_string(r.data.size()) +
                                                  " of " + std::to_string(want->size()) + ")"));
          }
        }
      }
      passes_[t].fetch_add(1);
    }
  }

  std::string mnt_;
  const std::map<std::string, std::string>& files_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> slowestMs_{0};
  std::array<std::atomic<uint64_t>, 4> passes_{};
  std::mutex mu_;
  std::vector<std::string> failures_;
  std::vector<std::thread> threads_;
};

}  // namespace epochfs::itest
