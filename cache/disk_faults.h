// DiskFaults: fault injection for the disk tier (tests only). The tier asks it
// before every segment read, segment write/create and probe I/O; it answers
// with the injected error (EIO on reads, ENOSPC on writes, ...) after an
// injected stall, or ok. Nothing is injected unless a test sets it.
//
// Two ways to drive it:
//  - unit tests hold a shared_ptr and call set();
//  - a mounted daemon reads a control file named by the test-only environment
//    variable EPOCHFS_TEST_DISK_FAULTS (fromEnvironment()). The file is re-read
//    when it changes (checked at most every 50 ms), so a test injects and
//    clears faults while the daemon runs. Its content, whitespace-separated:
//      read=eio|ok   write=enospc|eio|ok   stall_ms=N
//    (a missing or empty file means no faults).
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "cache/mutex.h"
#include "cache/status.h"

namespace epochfs::cache {

class DiskFaults {
 public:
  static constexpr const char* kEnvVar = "EPOCHFS_TEST_DISK_FAULTS";

  DiskFaults() = default;
  // Faults driven by a control file (see above).
  explicit DiskFaults(std::string controlFile);
  // From $EPOCHFS_TEST_DISK_FAULTS; null when it is unset or empty.
  static std::shared_ptr<DiskFaults> fromEnvironment();

  // errno to inject (0: none) and the stall before every I/O.
  void set(int readErrno, int writeErrno, std::chrono::milliseconds stall);
  void clear() { set(0, 0, std::chrono::milliseconds(0)); }

  // Called before a read / a write of the disk tier: sleeps for the stall,
  // then returns the injected error or ok.
  Status beforeRead(const std::string& what) { return inject(false, what); }
  Status beforeWrite(const std::string& what) { return inject(true, what); }

  // Parses a control file's content; false (and nothing changed) on a bad token.
  bool parse(const std::string& text);

 private:
  Status inject(bool write, const std::string& what);
  void reloadIfChanged();

  std::atomic<int> readErrno_{0};
  std::atomic<int> writeErrno_{0};
  std::atomic<int64_t> stallMs_{0};

  const std::string controlFile_;  // "" when driven by set() only
  Mutex reloadMu_;
  std::chrono::steady_clock::time_point lastCheck_ GUARDED_BY(reloadMu_){};
  struct timespec lastMtime_ GUARDED_BY(reloadMu_) {};
  int64_t lastSize_ GUARDED_BY(reloadMu_) = -1;
  bool lastExisted_ GUARDED_BY(reloadMu_) = false;
};

}  // namespace epochfs::cache
