#include "tools/bench/epochbench/case_mount.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;

// pid's parent if it runs the same program (an epochfs supervisor), else nullopt.
std::optional<pid_t> sameProgramParent(pid_t pid) {
  auto readFile = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) != 2 || ppid <= 1) {
    return std::nullopt;
  }
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  auto parent_exe = fs::read_symlink("/proc/" + std::to_string(ppid) + "/exe", ec);
  if (ec || exe.filename() != parent_exe.filename()) return std::nullopt;
  return ppid;
}

}  // namespace

CaseMount::~CaseMount() {
  epochfs_.reset();
  guard_.reset();
  if (!daemon_pids_.empty() && name_ != "epochfs") waitForExit(daemon_pids_.front(), 15);
  if (cleanup_ >= 0) runCleanup(cleanup_);  // rclone's cache dir
}

double CaseMount::daemonCpuSeconds() const {
  double total = 0;
  for (pid_t pid : daemon_pids_) total += processCpuSeconds(pid).value_or(0);
  return total;
}

std::unique_ptr<CaseMount> CaseMount::open(const std::string& name, const std::string& source,
                                           const std::string& epochfs,
                                           const std::vector<std::string>& epochfs_args,
                                           ScratchDir& scratch, std::string* error) {
  static int serial = 0;
  if (name == "native") return std::make_unique<CaseMount>(name, source);
  if (name != "bindfs" && name != "rclone" && name != "epochfs") {
    *error = "no such case '" + name + "' (native, bindfs, rclone, epochfs)";
    return nullptr;
  }
  if (name == "epochfs") {
    std::string binary = epochfs.empty() ? selfExeDir() + "/epochfs" : epochfs;
    if (findExecutable(binary).empty()) {
      *error = "epochfs not found at " + binary + " (build it, or --epochfs)";
      return nullptr;
    }
    auto em = EpochfsMount::start(binary, source, scratch, epochfs_args, nullptr, error);
    if (!em) return nullptr;
    auto m = std::make_unique<CaseMount>(name, em->mountpoint());
    m->daemon_pids_.push_back(em->pid());
    if (auto sup = sameProgramParent(em->pid())) m->daemon_pids_.push_back(*sup);
    m->epochfs_ = std::move(em);
    return m;
  }
  std::string binary = findExecutable(name);
  if (binary.empty()) {
    *error = name + " is not installed (apt-get install " + name + ")";
    return nullptr;
  }
  std::string mnt = scratch.makeSubdir(name + "-" + std::to_string(++serial));
  auto m = std::make_unique<CaseMount>(name, mnt);
  std::vector<std::string> command;
  if (name == "bindfs") {
    command = {binary, "-o", "ro", source, mnt};
  } else {  // rclone: a fresh, empty cache directory per mount, removed after it
    std::string cache = scratch.makeSubdir("rclone-cache-" + std::to_string(serial));
    m->cleanup_ = registerCleanup([cache] {
      std::error_code ec;
      fs::remove_all(cache, ec);  // never a mountpoint: the mount is at `mnt`
    });
    command = {binary, "mount",       source, mnt,        "--read-only", "--vfs-cache-mode",
               "full", "--cache-dir", cache,  "--daemon", "--log-level", "ERROR"};
  }
  m->guard_ = MountGuard::mount(command, mnt, error);
  if (!m->guard_) return nullptr;
  auto pid = findProcessByMount(name, mnt);
  if (!pid) {
    *error = name + " pid not found for " + mnt;
    return nullptr;
  }
  m->daemon_pids_.push_back(*pid);
  return m;
}

}  // namespace epochfs::bench
