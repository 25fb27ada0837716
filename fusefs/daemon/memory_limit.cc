#include "fusefs/daemon/memory_limit.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "fusefs/mount_table.h"

namespace epochfs::fusefs {

namespace {

// Values at or above this are "no limit" (v1 writes LONG_MAX rounded to a page).
constexpr uint64_t kNoLimitAbove = uint64_t{1} << 60;

struct CgroupMount {
  std::string root;        // the hierarchy's directory that is mounted ("/" usually)
  std::string mountPoint;  // where
};

// The cgroup2 mount (v2 = true) or the v1 mount carrying the memory controller.
bool findMount(const std::string& mountinfo, bool v2, CgroupMount* out) {
  for (const MountEntry& m : MountTable::read(mountinfo)) {
    const bool match = v2 ? m.fstype == "cgroup2"
                          : m.fstype == "cgroup" && MountTable::hasOption(m.superOptions, "memory");
    if (!match) continue;
    out->root = m.root;
    out->mountPoint = m.mountPoint;
    return true;
  }
  return false;
}

// This process's path in the v2 hierarchy (v2 = true) or the v1 memory one.
bool cgroupPath(const std::string& procSelfCgroup, bool v2, std::string* out) {
  std::ifstream f(procSelfCgroup);
  std::string line;
  while (std::getline(f, line)) {
    // hierarchy-id:controllers:path (the path may itself contain ':').
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1);
    const bool match =
        v2 ? id == "0" && controllers.empty() : MountTable::hasOption(controllers, "memory");
    if (match) {
      *out = line.substr(b + 1);
      return true;
    }
  }
  return false;
}

// The smallest limit from the process's cgroup directory up to the mount's
// root directory; records which file set it.
void minLimitUpTree(const std::string& procSelfCgroup, const std::string& mountinfo, bool v2,
                    uint64_t* best, std::string* bestFile) {
  CgroupMount m;
  std::string path;
  if (!findMount(mountinfo, v2, &m) || !cgroupPath(procSelfCgroup, v2, &path)) return;
  // The path is relative to the hierarchy's root; the mount shows m.root.
  std::string rel = path;
  if (m.root != "/") {
    // A mounted sub-tree: the path must lie under it, or only its root is visible.
    const bool under = rel == m.root || rel.rfind(m.root + "/", 0) == 0;
    rel = under ? rel.substr(m.root.size()) : std::string();
  }
  // Outside the visible part of the hierarchy (a cgroup namespace shows
  // "/../x"): only the mount's root directory can be read.
  if (rel.find("/..") != std::string::npos || rel.rfind("..", 0) == 0) rel.clear();
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  const char* file = v2 ? "memory.max" : "memory.limit_in_bytes";
  while (true) {
    std::string dir = m.mountPoint + rel;
    const std::string limitFile = dir + "/" + file;
    std::ifstream f(limitFile);
    std::string value;
    if (f >> value) {
      const uint64_t n = parseCgroupLimitValue(value);
      if (n > 0 && (*best == 0 || n < *best)) {
        *best = n;
        *bestFile = limitFile;
      }
    }
    if (rel.empty()) break;
    const size_t slash = rel.rfind('/');
    rel = slash == std::string::npos ? std::string() : rel.substr(0, slash);
  }
}

uint64_t memTotal(const std::string& meminfo) {
  std::ifstream f(meminfo);
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key) {
    if (key == "MemTotal:" && f >> kb) return kb * 1024;
    std::getline(f, unit);
  }
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

uint64_t parseCgroupLimitValue(const std::string& text) {
  if (text.empty() || text == "max") return 0;
  if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 20) return 0;
  errno = 0;
  const unsigned long long n = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0 || n >= kNoLimitAbove) return 0;
  return n;
}

uint64_t MemoryLimit::effectiveBytes() const {
  if (cgroupLimitBytes > 0 && (memTotalBytes == 0 || cgroupLimitBytes < memTotalBytes)) {
    return cgroupLimitBytes;
  }
  return memTotalBytes;
}

const char* MemoryLimit::effectiveSource() const {
  return cgroupLimitBytes > 0 && (memTotalBytes == 0 || cgroupLimitBytes < memTotalBytes)
             ? "cgroup"
             : "MemTotal";
}

MemoryLimit detectMemoryLimit(const MemoryLimitPaths& paths) {
  MemoryLimit m;
  m.memTotalBytes = memTotal(paths.procMeminfo);
  for (bool v2 : {true, false}) {
    minLimitUpTree(paths.procSelfCgroup, paths.procSelfMountinfo, v2, &m.cgroupLimitBytes,
                   &m.cgroupLimitFile);
  }
  return m;
}

MemoryDefaults memoryDefaults(uint64_t effectiveBytes) {
  MemoryDefaults d;
  d.ramCacheBytes = effectiveBytes / 4;
  d.prefetchBytes =
      std::clamp<uint64_t>(effectiveBytes / 16, uint64_t{4} << 20, uint64_t{256} << 20);
  return d;
}

void boundAllocatorRetention() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

uint64_t currentRssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t sizePages = 0, residentPages = 0;
  if (!(f >> sizePages >> residentPages)) return 0;
  return residentPages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t receivePoolBytesFor(uint64_t effectiveBytes) {
  return std::clamp<uint64_t>(effectiveBytes / 32, uint64_t{4} << 20, uint64_t{32} << 20);
}

uint64_t pressureMarginBytes(uint64_t effectiveBytes) {
  return std::clamp<uint64_t>(effectiveBytes / 16, uint64_t{8} << 20, uint64_t{256} << 20);
}

RamCacheFit fitRamCache(uint64_t limitBytes, uint64_t ramCacheBytes, uint64_t guestExtraBytes,
                        uint64_t receivePoolBytes) {
  RamCacheFit fit;
  fit.fixedBytes = kDaemonBaseBytes + receivePoolBytes + guestExtraBytes;
  const uint64_t room = limitBytes > fit.fixedBytes ? limitBytes - fit.fixedBytes : 0;
  fit.clamped = limitBytes > 0 && ramCacheBytes > room;
  fit.ramCacheBytes = fit.clamped ? room : ramCacheBytes;
  return fit;
}

CgroupUsageFiles cgroupUsageFiles(const std::string& cgroupLimitFile) {
  CgroupUsageFiles f;
  const size_t slash = cgroupLimitFile.rfind('/');
  if (slash == std::string::npos) return f;
  const std::string dir = cgroupLimitFile.substr(0, slash + 1);
  const bool v2 = cgroupLimitFile.compare(slash + 1, std::string::npos, "memory.max") == 0;
  f.usageFile = dir + (v2 ? "memory.current" : "memory.usage_in_bytes");
  f.statFile = dir + "memory.stat";
  f.inactiveFileKey = v2 ? "inactive_file" : "total_inactive_file";
  return f;
}

bool readCgroupWorkingSet(const CgroupUsageFiles& files, uint64_t* bytes) {
  if (files.empty()) return false;
  std::ifstream u(files.usageFile);
  std::string value;
  if (!(u >> value)) return false;
  const uint64_t usage = parseCgroupLimitValue(value);
  if (usage == 0 && value != "0") return false;
  uint64_t inactive = 0;
  std::ifstream st(files.statFile);
  std::string key;
  uint64_t n = 0;
  while (st >> key >> n) {
    if (key == files.inactiveFileKey) {
      inactive = n;
      break;
    }
  }
  *bytes = usage > inactive ? usage - inactive : 0;
  return true;
}

}  // namespace epochfs::fusefs
