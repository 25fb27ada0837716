// Shared helpers of the integration tests: they mount the real `epochfs`
// binary (EPOCHFS_BIN_DIR) over a temp dir and always unmount.
//
// Every test gets ${TMPDIR:-/tmp}/epochfs-itest-PID-XXXXXX/{src,mnt,cache}
// (tools/test unmounts mounts under that prefix whose PID is gone). The fixture makes the
// test process a child subreaper, so a daemon that daemonizes is re-parented
// to the test: its exit status can be collected, and a daemon that lingers
// after its unmount is reported (and killed) in TearDown.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epochfs::itest {

// ---- processes ---------------------------------------------------------------

enum class Identity {
  kSelf,            // the test's own credentials (root on CI)
  kNobody,          // uid/gid 65534, no supplementary groups
  kRootWithoutDac,  // uid 0 without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH
};

struct SpawnOptions {
  Identity identity = Identity::kSelf;
  // stdout/stderr go to memfds unless set; with a pipe, a daemon that keeps
  // the caller's stdio open after the parent exited is detected
  // (ProcResult::stdioHeldOpen) instead of hanging `$(epochfs ...)`.
  bool pipeStdio = false;
};

struct ProcResult {
  int exitCode = -1;      // exit status; -1 if killed by a signal or timed out
  int termSignal = 0;     // signal that ended it, if any
  bool timedOut = false;  // killed after the timeout
  bool stdioHeldOpen = false;
  double seconds = 0;
  std::string out, err;
  std::string describe() const;  // for failure messages
};

// Runs argv[0] (a path) to completion, killing it after timeoutSec.
// argv as execv wants it (pointers into `argv`, null-terminated).
std::vector<char*> cArgv(const std::vector<std::string>& argv);
// Everything in the file open at `fd`, read from offset 0.
std::string readAllFrom(int fd);

ProcResult runProcess(const std::vector<std::string>& argv, double timeoutSec,
                      const SpawnOptions& opts = {});

// Starts argv in the background with stdout+stderr appended to logPath.
pid_t spawnBackground(const std::vector<std::string>& argv, const std::string& logPath,
                      Identity identity = Identity::kSelf);

// Waits up to timeoutSec for `pid` to end. Works for children (including
// daemons re-parented to us, see enableSubreaper) and, without an exit
// status, for other processes. Returns the wait status, or nullopt on timeout
// (for a non-child that ended: 0).
std::optional<int> waitForExit(pid_t pid, double timeoutSec);

void enableSubreaper();
std::vector<pid_t> liveChildren();  // from /proc/self/task/*/children

// ---- mounts ------------------------------------------------------------------

std::string epochfsBinary();  // $EPOCHFS_BIN_DIR, else the build's bin/
std::vector<std::string> mountPointsUnder(const std::string& prefix);  // from mountinfo
bool isMounted(const std::string& path);
bool waitMounted(const std::string& path, bool wanted, double timeoutSec);
// fusermount3 -u, falling back to a lazy umount2; true if no longer mounted.
bool unmountPath(const std::string& path);
// Why integration tests cannot run here, or "" if they can.
std::string environmentSkipReason();

// sync + `echo 1 > /proc/sys/vm/drop_caches`; false if not permitted.
bool dropPageCache();
// POSIX_FADV_DONTNEED on every regular file under root (a per-file fallback).
void fadviseDontNeedTree(const std::string& root);

// ---- admin socket ----------------------------------------------------------

// Path advertised by getxattr(mnt, "user.epochfs.admin"); "" on error.
std::string adminSocketPath(const std::string& mnt, std::string* error = nullptr);
// Sends one request; on a client-side failure returns
// {"ok": false, "error": "client: ..."}.
nlohmann::json adminRequest(const std::string& mnt, const nlohmann::json& request);
// Value at a dotted path ("tiers.ram.hit_bytes"); nullopt if absent or not a number.
std::optional<uint64_t> counter(const nlohmann::json& j, std::string_view dottedPath);
// /proc/PID/io as a map (rchar, read_bytes, syscr, ...).
std::map<std::string, uint64_t> procIo(pid_t pid);

// ---- files -----------------------------------------------------------------

std::string randomBytes(size_t n, uint64_t seed);
void writeFile(const std::string& path, std::string_view data, mode_t mode = 0644);
struct ReadResult {
  int err = 0;  // errno of the failing open/read, 0 on success
  std::string data;
};
// open + read() in `bufSize` pieces until EOF.
ReadResult readFile(const std::string& path, size_t bufSize = 128 * 1024);
uint64_t xxh3(std::string_view data);
void mkdirs(const std::string& path, mode_t mode = 0755);
void removeTree(const std::string& path);  // does not cross mount points

// One lstat'ed entry of a tree, relative path as the key.
struct Entry {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  off_t size = 0;
  int64_t mtimeNs = 0;
  std::string target;  // symlinks
  uint64_t hash = 0;   // regular files, when hashed
  int readErr = 0;     // regular files, errno of a failed read
};
using Tree = std::map<std::string, Entry>;
Tree snapshotTree(const std::string& root, bool hashContents);
// Regular files under root, relative paths, sorted.
std::vector<std::string> regularFiles(const std::string& root);
// Sum of sizes of regular files under root.
uint64_t treeBytes(const std::string& root);

// ---- the fixture -------------------------------------------------------------

class MountTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs `epochfs SRC MNT extra...` (daemonizing). On success records the
  // mount for TearDown and the daemon pid (via the admin "status" command).
  ProcResult mount(const std::vector<std::string>& extra = {}, double timeoutSec = 60);
  ProcResult mountAt(const std::string& src, const std::string& mnt,
                     const std::vector<std::string>& extra, double timeoutSec = 60,
                     const SpawnOptions& opts = {});
  // Unmounts and waits (10 s) for its daemon to exit, unless the daemon
  // still serves another recorded mount (a shared daemon); false on failure.
  bool unmount(const std::string& mnt);
  bool unmount() { return unmount(mnt_); }
  // Wait status of the daemon that served `mnt` after unmount(mnt), if known.
  std::optional<int> lastDaemonStatus() const { return lastDaemonStatus_; }

  nlohmann::json admin(const std::string& cmd, const std::string& mnt = "");
  nlohmann::json stats(const std::string& mnt = "") { return admin("stats", mnt); }
  pid_t daemonPid(const std::string& mnt = "");

  // Drops the page cache (or falls back to fadvise on the mount); never fails
  // a test by itself.
  void dropCaches(const std::string& mnt = "");

  std::string root_, src_, mnt_, cache_;

 private:
  struct Mounted {
    std::string mnt;
    pid_t pid = -1;
  };
  std::mutex mountedMu_;  // mountAt() may run on several threads (a cluster's parallel start)
  std::vector<Mounted> mounted_;
  std::optional<int> lastDaemonStatus_;
};

// Asserts stderr is exactly one line that starts with "epochfs: ", and that it
// contains one of `anyOf` (case-insensitive) when given.
::testing::AssertionResult oneEpochfsLine(const ProcResult& r,
                                          const std::vector<std::string>& anyOf = {});

}  // namespace epochfs::itest
