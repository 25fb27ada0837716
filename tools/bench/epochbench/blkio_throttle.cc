#include "tools/bench/epochbench/blkio_throttle.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

namespace epochfs::bench {
namespace {

constexpr const char* kV1Root = "/sys/fs/cgroup/blkio";
constexpr const char* kV2Root = "/sys/fs/cgroup";

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One write(2) of `value`, as cgroup files want; sets `error` on failure.
bool writeFile(const std::string& path, const std::string& value, std::string* error) {
  std::FILE* f = std::fopen(path.c_str(), "we");
  bool ok = f != nullptr && std::fwrite(value.data(), 1, value.size(), f) == value.size();
  int saved = errno;
  if (f != nullptr && std::fclose(f) != 0) ok = false, saved = errno;
  if (!ok && error) *error = "write '" + value + "' to " + path + ": " + std::strerror(saved);
  return ok;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// This process's cgroup path in the hierarchy whose /proc/self/cgroup line
// matches: v1 "N:blkio:/path" (controllers may be comma-joined), v2 "0::/path".
std::string ownCgroup(bool v2) {
  std::istringstream lines(readFile("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = ",";  // built piecewise: GCC 12 -Wrestrict misfires on "," + s
    controllers.append(line, a + 1, b - a - 1).append(",");
    bool match =
        v2 ? line.substr(0, b + 1) == "0::" : controllers.find(",blkio,") != std::string::npos;
    if (match) return line.substr(b + 1);
  }
  return "/";
}

std::string uniqueName() {
  static int counter = 0;
  return "epochbench-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

std::unique_ptr<BlkioThrottle> BlkioThrottle::create(dev_t device, uint64_t read_bps,
                                                     std::string* error) {
  const std::string dev = std::to_string(major(device)) + ":" + std::to_string(minor(device));
  bool v2;
  std::string parent, home;
  if (exists(std::string(kV1Root) + "/blkio.throttle.read_bps_device")) {
    v2 = false;
    // Under our own blkio cgroup: inside a container that may be all we may write.
    std::string own = ownCgroup(false);
    parent = std::string(kV1Root) + (own == "/" ? "" : own);
    home = parent;
  } else if (readFile(std::string(kV2Root) + "/cgroup.controllers").find("io") !=
             std::string::npos) {
    v2 = true;
    // Under the root: v2 lets only the root hold processes and delegate io
    // at once (the "no internal processes" rule).
    parent = kV2Root;
    std::string own = ownCgroup(true);
    home = std::string(kV2Root) + (own == "/" ? "" : own);
    if (readFile(parent + "/cgroup.subtree_control").find("io") == std::string::npos &&
        !writeFile(parent + "/cgroup.subtree_control", "+io", error)) {
      return nullptr;
    }
  } else {
    *error = "no block-I/O controller: neither " + std::string(kV1Root) +
             "/blkio.throttle.read_bps_device (cgroup v1) nor io in " + kV2Root +
             "/cgroup.controllers (cgroup v2)";
    return nullptr;
  }
  std::string path = parent + "/" + uniqueName();
  if (::mkdir(path.c_str(), 0755) != 0) {
    *error = "mkdir " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<BlkioThrottle> t(new BlkioThrottle(v2, path, home, device));
  bool ok = v2 ? writeFile(path + "/io.max", dev + " rbps=" + std::to_string(read_bps), error)
               : writeFile(path + "/blkio.throttle.read_bps_device",
                           dev + " " + std::to_string(read_bps), error);
  if (!ok) return nullptr;  // the destructor removes the cgroup
  return t;
}

std::string BlkioThrottle::deviceId() const {
  return std::to_string(major(device_)) + ":" + std::to_string(minor(device_));
}

bool BlkioThrottle::addProcess(pid_t pid, std::string* error) {
  return writeFile(path_ + "/cgroup.procs", std::to_string(pid), error);
}

bool BlkioThrottle::removeProcess(pid_t pid, std::string* error) {
  return writeFile(home_ + "/cgroup.procs", std::to_string(pid), error);
}

std::optional<uint64_t> BlkioThrottle::readBytes() const {
  if (path_.empty()) return std::nullopt;
  const std::string dev = deviceId();
  std::istringstream lines(
      readFile(path_ + (v2_ ? "/io.stat" : "/blkio.throttle.io_service_bytes")));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, word;
    fields >> id;
    if (id != dev) continue;
    if (!v2_) {  // "7:0 Read 12345"
      std::string kind, bytes;
      if (fields >> kind >> bytes && kind == "Read") return std::stoull(bytes);
      continue;
    }
    while (fields >> word) {  // "7:0 rbytes=12345 wbytes=... rios=..."
      if (word.rfind("rbytes=", 0) == 0) return std::stoull(word.substr(7));
    }
  }
  return uint64_t{0};  // no line yet: nothing read
}

void BlkioThrottle::destroy() {
  if (path_.empty()) return;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::istringstream procs(readFile(path_ + "/cgroup.procs"));
    for (std::string pid; procs >> pid;) writeFile(home_ + "/cgroup.procs", pid, nullptr);
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "epochbench: could not remove cgroup %s: %s; run: rmdir %s\n",
                   path_.c_str(), std::strerror(errno), path_.c_str());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  path_.clear();
}

}  // namespace epochfs::bench
