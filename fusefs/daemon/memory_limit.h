// MemoryLimit: how much memory the daemon may use, as the kernel will enforce
// it. In a container or a batch job's cgroup the host's RAM is the wrong
// figure: a RAM tier sized from MemTotal gets the daemon OOM-killed. The
// effective limit is the smallest of MemTotal and every memory limit on the
// way from the daemon's cgroup up to the hierarchy's root:
//   - cgroup v2: `memory.max` (from the `0::PATH` line of /proc/self/cgroup,
//     under the cgroup2 mount),
//   - cgroup v1: `memory.limit_in_bytes` (from the `N:...memory...:PATH`
//     line, under the v1 mount whose options include `memory`).
// "max", and v1's "unlimited" (9223372036854771712 = LONG_MAX rounded down to
// a page), mean no limit. Both hierarchies are read when both are mounted
// (hybrid systems); the smallest limit wins.
//
// The memory defaults (RAM tier, prefetch budget) derive from the effective
// limit: memoryDefaults() (docs/CONFIGURATION.md).
//
// All paths come from MemoryLimitPaths so the unit tests can point the
// detection at fake /proc and cgroup files. Thread-safety: free functions,
// no shared state.
#pragma once

#include <cstdint>
#include <string>

namespace epochfs::fusefs {

struct MemoryLimitPaths {
  std::string procSelfCgroup = "/proc/self/cgroup";
  std::string procSelfMountinfo = "/proc/self/mountinfo";
  std::string procMeminfo = "/proc/meminfo";
};

struct MemoryLimit {
  uint64_t memTotalBytes = 0;     // MemTotal (sysconf if /proc/meminfo is unreadable)
  uint64_t cgroupLimitBytes = 0;  // the smallest cgroup limit found; 0: none
  // Which file set cgroupLimitBytes (e.g. "/sys/fs/cgroup/memory/job/memory.limit_in_bytes"),
  // empty when no cgroup limit applies.
  std::string cgroupLimitFile;

  // min(MemTotal, cgroup limit): what the defaults derive from.
  uint64_t effectiveBytes() const;
  // "cgroup" or "MemTotal": which of the two effectiveBytes() is.
  const char* effectiveSource() const;
};

// Reads the limit. Never fails: unreadable or malformed files count as "no
// limit there" (a missing cgroup file must not stop a mount).
MemoryLimit detectMemoryLimit(const MemoryLimitPaths& paths = {});

// Parses one limit file's content: a byte count, or "max". Returns 0 for no
// limit ("max", v1's unlimited value, anything >= 2^60, malformed text).
uint64_t parseCgroupLimitValue(const std::string& text);

// The defaults that derive from the effective limit.
struct MemoryDefaults {
  uint64_t ramCacheBytes = 0;  // 25% of the limit
  uint64_t prefetchBytes = 0;  // 1/16 of the limit, at most 256 MiB, at least 4 MiB
};
MemoryDefaults memoryDefaults(uint64_t effectiveBytes);

// Keeps freed chunk buffers from staying resident: pins glibc's mmap
// threshold at 128 KiB (mallopt(M_MMAP_THRESHOLD)), so every buffer of a
// 1 MiB chunk is its own mapping, returned to the kernel when the chunk is
// evicted. Left to itself glibc raises the threshold after the first such
// free, later chunks come from per-thread arenas, and their freed space stays
// resident: a 32 MiB RAM tier measured 122 MiB anonymous RSS. Does nothing when
// MALLOC_MMAP_THRESHOLD_ is set (the operator's choice wins). Call once, early.
void boundAllocatorRetention();

// This process's resident set (VmRSS from /proc/self/statm); 0 if unreadable.
uint64_t currentRssBytes();

// ---- Fitting the daemon into its limit (docs/CONFIGURATION.md "Memory") ----
//
// Everything of the daemon besides its RAM tier counts against the same limit:
// the binary, libraries, UCX and the threads' stacks (kDaemonBaseBytes: 16 MiB
// RSS measured idle in a cluster of 4, 10 MiB of it file pages), the peer
// receive pool, and the prefetch memory (the tier's guests' extra in a
// cluster). The rest of the limit is shared with whatever else the cgroup runs
// (a job's readers and their page cache): the pressure margin is kept free for
// them, and the watcher (memory_pressure_watcher.h) shrinks the tier when they
// take more.
inline constexpr uint64_t kDaemonBaseBytes = uint64_t{16} << 20;

// Idle peer receive buffers kept for reuse: 1/32 of the limit, 4..32 MiB.
uint64_t receivePoolBytesFor(uint64_t effectiveBytes);
// What the watcher keeps free of the limit: 1/16 of it, 8..256 MiB.
uint64_t pressureMarginBytes(uint64_t effectiveBytes);

struct RamCacheFit {
  uint64_t ramCacheBytes = 0;  // the tier's owned budget that fits (<= the one asked for)
  uint64_t fixedBytes = 0;     // base + receive pool + guests' extra
  bool clamped = false;
};
// The largest owned budget, at most `ramCacheBytes`, for which owned + guests'
// extra + kDaemonBaseBytes + receive pool <= limit: the daemon alone must fit.
// The pressure margin is not reserved here: the watcher keeps it free when
// the rest of the cgroup needs it, and a tier clamped below what the cluster's
// placement needs (capacity is its weight) would cost more than it saves.
RamCacheFit fitRamCache(uint64_t limitBytes, uint64_t ramCacheBytes, uint64_t guestExtraBytes,
                        uint64_t receivePoolBytes);

// The files that tell how much of the limiting cgroup is in use: v2
// memory.current and memory.stat's inactive_file, v1 memory.usage_in_bytes and
// memory.stat's total_inactive_file, in the directory of `cgroupLimitFile`
// (MemoryLimit::cgroupLimitFile). All empty when that is empty.
struct CgroupUsageFiles {
  std::string usageFile;
  std::string statFile;
  std::string inactiveFileKey;
  bool empty() const { return usageFile.empty(); }
};
CgroupUsageFiles cgroupUsageFiles(const std::string& cgroupLimitFile);
// The cgroup's working set: its usage less its inactive page cache (which the
// kernel reclaims before it OOM-kills anyone). False if unreadable.
bool readCgroupWorkingSet(const CgroupUsageFiles& files, uint64_t* bytes);

}  // namespace epochfs::fusefs
