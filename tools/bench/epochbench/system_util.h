// Small wrappers over the OS that the benchmark needs: running a command,
// finding executables and mounts, reading a process's CPU time, dropping the
// kernel page cache.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace epochfs::bench {

// Runs argv[0] (looked up in PATH) and waits for it, at most `timeout_s`
// seconds (then kills it). The child gets an empty signal mask. With `quiet`
// its stdout/stderr go to /dev/null. Returns the exit status, or -1.
int runCommand(const std::vector<std::string>& argv, int timeout_s = 60, bool quiet = false);

// Like runCommand, but captures the child's stdout (stderr passes through)
// into `output`. Returns the exit status, or -1.
int runCommandOutput(const std::vector<std::string>& argv, std::string* output, int timeout_s = 60);

// Full path of `name` in PATH (or `name` itself if it contains a '/' and is
// executable); empty if not found.
std::string findExecutable(const std::string& name);

// Directory of the running executable (dirname of /proc/self/exe).
std::string selfExeDir();

// True if `path` (absolute, canonical) is a mount point in /proc/self/mountinfo.
bool isMounted(const std::string& path);

// Polls isMounted(path) for up to `timeout_s` seconds.
bool waitForMount(const std::string& path, double timeout_s);

// utime + stime of process `pid`, all threads, in seconds.
std::optional<double> processCpuSeconds(pid_t pid);

// All CPUs' busy and total jiffies since boot (/proc/stat "cpu" line; busy
// excludes idle and iowait). The busy share of a pass is the difference of two.
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
std::optional<CpuTimes> systemCpuTimes();
// Busy fraction between two readings (nullopt if either is missing).
std::optional<double> busyFraction(const std::optional<CpuTimes>& a,
                                   const std::optional<CpuTimes>& b);

// First process whose argv[0] has basename `program` and whose argv contains
// `mountpoint`.
std::optional<pid_t> findProcessByMount(const std::string& program, const std::string& mountpoint);

// The 1-minute load average from /proc/loadavg (0 if unreadable).
double loadAverage();

// sync(); echo MODE > /proc/sys/vm/drop_caches (1: page cache; 3: also
// dentries and inodes). On failure returns false and sets `error`.
bool dropPageCache(std::string* error, int mode = 1);

// `rchar` of /proc/PID/io: bytes the process got from read(2)-family calls.
std::optional<uint64_t> processReadChars(pid_t pid);

// Polls until process `pid` is gone, at most `timeout_s`; true if it is.
bool waitForExit(pid_t pid, double timeout_s);

// "100M" -> 104857600: a number with an optional K, M, G or T suffix (powers
// of 1024, optionally followed by "B" or "iB"). nullopt if malformed.
std::optional<uint64_t> parseByteSize(const std::string& text);

}  // namespace epochfs::bench
