#include "tools/bench/epochbench/system_util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "fusefs/mount_table.h"

extern char** environ;

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;

std::string readSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool isExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

namespace {

// posix_spawn of argv with an empty signal mask and default dispositions;
// stdout (and stderr with `quiet`) redirected as asked. Returns the pid or -1.
pid_t spawnChild(const std::vector<std::string>& argv, bool quiet, int stdout_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  } else if (stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  }
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// Waits for child `pid`, killing it after `timeout_s`; its exit status or -1.
int waitChild(pid_t pid, int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (w < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int runCommandOutput(const std::vector<std::string>& argv, std::string* output, int timeout_s) {
  output->clear();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = spawnChild(argv, /*quiet=*/false, fds[1]);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return -1;
  }
  // The commands used here print a line or two; read to EOF, then reap.
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      output->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  return waitChild(pid, timeout_s);
}

int runCommand(const std::vector<std::string>& argv, int timeout_s, bool quiet) {
  pid_t pid = spawnChild(argv, quiet, -1);
  return pid < 0 ? -1 : waitChild(pid, timeout_s);
}

std::string findExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return isExecutableFile(name) ? name : "";
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutableFile(candidate)) return candidate;
  }
  return "";
}

std::string selfExeDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

bool isMounted(const std::string& path) {
  for (const fusefs::MountEntry& m : fusefs::MountTable::read()) {
    if (m.mountPoint == path) return true;
  }
  return false;
}

bool waitForMount(const std::string& path, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!isMounted(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::optional<CpuTimes> systemCpuTimes() {
  std::istringstream in(readSmallFile("/proc/stat"));
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  CpuTimes t;
  unsigned long long v = 0;
  for (int i = 0; i < 8 && in >> v; ++i) {  // user nice system idle iowait irq softirq steal
    t.total += v;
    if (i != 3 && i != 4) t.busy += v;
  }
  if (t.total == 0) return std::nullopt;
  return t;
}

std::optional<double> busyFraction(const std::optional<CpuTimes>& a,
                                   const std::optional<CpuTimes>& b) {
  if (!a || !b || b->total <= a->total) return std::nullopt;
  return static_cast<double>(b->busy - a->busy) / static_cast<double>(b->total - a->total);
}

std::optional<double> processCpuSeconds(pid_t pid) {
  std::string stat = readSmallFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');  // comm may contain spaces and ')'
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields after comm start at field 3 (state); utime is 14, stime 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  if (!fields) return std::nullopt;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::optional<pid_t> findProcessByMount(const std::string& program, const std::string& mountpoint) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::string cmdline = readSmallFile("/proc/" + name + "/cmdline");
    std::vector<std::string> args;
    for (size_t start = 0; start < cmdline.size();) {
      size_t end = cmdline.find('\0', start);
      if (end == std::string::npos) end = cmdline.size();
      args.push_back(cmdline.substr(start, end - start));
      start = end + 1;
    }
    if (args.empty() || fs::path(args[0]).filename() != program) continue;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == mountpoint) return pid;
    }
  }
  return std::nullopt;
}

double loadAverage() {
  std::istringstream in(readSmallFile("/proc/loadavg"));
  double load = 0;
  in >> load;
  return load;
}

bool dropPageCache(std::string* error, int mode) {
  ::sync();
  int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  const char value = static_cast<char>('0' + mode);
  bool ok = fd >= 0 && ::write(fd, &value, 1) == 1;
  if (!ok && error) *error = std::string("drop_caches: ") + std::strerror(errno);
  if (fd >= 0) ::close(fd);
  return ok;
}

std::optional<uint64_t> processReadChars(pid_t pid) {
  std::istringstream lines(readSmallFile("/proc/" + std::to_string(pid) + "/io"));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("rchar:", 0) == 0) return std::stoull(line.substr(6));
  }
  return std::nullopt;
}

bool waitForExit(pid_t pid, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (::kill(pid, 0) == 0 || errno != ESRCH) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::optional<uint64_t> parseByteSize(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !(value >= 0)) return std::nullopt;
  std::string suffix(end);
  double scale = 1;
  if (!suffix.empty()) {
    size_t unit = std::string("KMGT").find(static_cast<char>(std::toupper(suffix[0])));
    if (unit != std::string::npos) {
      scale = std::pow(1024.0, static_cast<double>(unit + 1));
      suffix.erase(0, 1);
    }
  }
  if (!suffix.empty() && suffix != "B" && suffix != "iB") return std::nullopt;
  if (value * scale >= 0x1p63) return std::nullopt;
  return static_cast<uint64_t>(value * scale);
}

}  // namespace epochfs::bench
