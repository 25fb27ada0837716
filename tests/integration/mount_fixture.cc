#include "tests/integration/mount_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "cache/checksum.h"
#include "fusefs/admin_protocol.h"
#include "fusefs/mount_table.h"

namespace epochfs::itest {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Runs in the forked child before exec: only async-signal-safe calls.
bool applyIdentity(Identity id) {
  if (id == Identity::kNobody) {
    return setgroups(0, nullptr) == 0 && setgid(65534) == 0 && setuid(65534) == 0;
  }
  if (id == Identity::kRootWithoutDac) {
    const unsigned long caps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH};
    for (unsigned long c : caps) {
      if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) return false;
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) != 0) return false;
    const uint32_t mask = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);
    data[0].effective &= ~mask;
    data[0].permitted &= ~mask;
    data[0].inheritable &= ~mask;
    return syscall(SYS_capset, &hdr, data) == 0;
  }
  return true;
}

std::string toLower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::vector<char*> cArgv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string readAllFrom(int fd) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

// ---- processes ---------------------------------------------------------------

std::string ProcResult::describe() const {
  std::ostringstream os;
  os << "exit=" << exitCode;
  if (termSignal) os << " signal=" << termSignal;
  if (timedOut) os << " TIMED OUT";
  if (stdioHeldOpen) os << " (a descendant kept stdio open)";
  os << " after " << seconds << " s; stderr=[" << err << "] stdout=[" << out << "]";
  return os.str();
}

ProcResult runProcess(const std::vector<std::string>& argv, double timeoutSec,
                      const SpawnOptions& opts) {
  ProcResult r;
  int outFd[2] = {-1, -1}, errFd[2] = {-1, -1};  // [0] parent reads, [1] child writes
  if (opts.pipeStdio) {
    if (pipe2(outFd, O_CLOEXEC) != 0 || pipe2(errFd, O_CLOEXEC) != 0) {
      r.err = "pipe2 failed";
      return r;
    }
  } else {
    outFd[0] = outFd[1] = memfd_create("itest-out", MFD_CLOEXEC);
    errFd[0] = errFd[1] = memfd_create("itest-err", MFD_CLOEXEC);
  }
  auto args = cArgv(argv);
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(outFd[1], 1);
    dup2(errFd[1], 2);
    if (!applyIdentity(opts.identity)) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  if (opts.pipeStdio) {
    close(outFd[1]);
    close(errFd[1]);
  }
  int status = 0;
  bool exited = false;
  double exitedAt = 0;
  bool outOpen = opts.pipeStdio, errOpen = opts.pipeStdio;
  for (;;) {
    if (!exited) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = true;
        exitedAt = secondsSince(t0);
      }
    }
    if (!exited && secondsSince(t0) > timeoutSec) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timedOut = true;
      exited = true;
      exitedAt = secondsSince(t0);
    }
    if (!opts.pipeStdio) {
      if (exited) break;
      sleepMs(5);
      continue;
    }
    if (!outOpen && !errOpen && exited) break;
    if (exited && secondsSince(t0) - exitedAt > 3.0) {
      r.stdioHeldOpen = true;
      break;
    }
    pollfd pfd[2] = {{outOpen ? outFd[0] : -1, POLLIN, 0}, {errOpen ? errFd[0] : -1, POLLIN, 0}};
    poll(pfd, 2, 20);
    for (int i = 0; i < 2; ++i) {
      if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = read(pfd[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      } else {
        (i == 0 ? outOpen : errOpen) = false;
      }
    }
  }
  r.seconds = exitedAt;
  if (!opts.pipeStdio) {
    r.out = readAllFrom(outFd[0]);
    r.err = readAllFrom(errFd[0]);
  }
  close(outFd[0]);
  close(errFd[0]);
  if (!r.timedOut) {
    if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.termSignal = WTERMSIG(status);
  }
  return r;
}

pid_t spawnBackground(const std::vector<std::string>& argv, const std::string& logPath,
                      Identity identity) {
  auto args = cArgv(argv);
  int logFd = open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(logFd, 1);
    dup2(logFd, 2);
    if (!applyIdentity(identity)) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  close(logFd);
  return pid;
}

std::optional<int> waitForExit(pid_t pid, double timeoutSec) {
  auto t0 = Clock::now();
  for (;;) {
    int status = 0;
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return status;
    if (w < 0 && errno == ECHILD) {
      // Not our child: poll for its disappearance (or zombie state).
      std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      if (!st || !std::getline(st, line)) return 0;
      auto rp = line.rfind(')');
      if (rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] == 'Z') return 0;
    }
    if (secondsSince(t0) > timeoutSec) return std::nullopt;
    sleepMs(10);
  }
}

void enableSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

std::vector<pid_t> liveChildren() {
  // Reap what has ended first so only running children remain.
  int status;
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
  std::vector<pid_t> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/children");
    pid_t p;
    while (in >> p) out.push_back(p);
  }
  closedir(d);
  return out;
}

// ---- mounts ------------------------------------------------------------------

std::string epochfsBinary() {
  // The environment may point the tests at another build (or an install).
  const char* dir = getenv("EPOCHFS_BIN_DIR");
  return std::string(dir && *dir ? dir : EPOCHFS_BIN_DIR) + "/epochfs";
}

std::vector<std::string> mountPointsUnder(const std::string& prefix) {
  std::vector<std::string> out;
  for (const fusefs::MountEntry& m : fusefs::MountTable::read()) {
    const std::string& mp = m.mountPoint;
    if (mp == prefix || mp.rfind(prefix + "/", 0) == 0) out.push_back(mp);
  }
  return out;
}

bool isMounted(const std::string& path) {
  for (const auto& m : mountPointsUnder(path)) {
    if (m == path) return true;
  }
  return false;
}

bool waitMounted(const std::string& path, bool wanted, double timeoutSec) {
  auto t0 = Clock::now();
  while (isMounted(path) != wanted) {
    if (secondsSince(t0) > timeoutSec) return false;
    sleepMs(20);
  }
  return true;
}

bool unmountPath(const std::string& path) {
  if (!isMounted(path)) return true;
  runProcess({"/usr/bin/fusermount3", "-u", path}, 10);
  if (waitMounted(path, false, 2)) return true;
  umount2(path.c_str(), MNT_DETACH);
  return waitMounted(path, false, 5);
}

std::string environmentSkipReason() {
  if (access(epochfsBinary().c_str(), X_OK) != 0) {
    return "epochfs binary not built: " + epochfsBinary();
  }
  int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("/dev/fuse not usable: ") + strerror(errno);
  close(fd);
  return "";
}

bool dropPageCache() {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, "1", 1) == 1;
  close(fd);
  return ok;
}

void fadviseDontNeedTree(const std::string& root) {
  for (const auto& rel : regularFiles(root)) {
    int fd = open((root + "/" + rel).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

// ---- admin socket ----------------------------------------------------------

std::string adminSocketPath(const std::string& mnt, std::string* error) {
  char buf[4096];
  ssize_t n = getxattr(mnt.c_str(), admin::kAdminXattr, buf, sizeof buf);
  if (n < 0) {
    if (error) *error = std::string("getxattr(") + admin::kAdminXattr + "): " + strerror(errno);
    return "";
  }
  std::string p(buf, static_cast<size_t>(n));
  while (!p.empty() && p.back() == '\0') p.pop_back();
  return p;
}

nlohmann::json adminRequest(const std::string& mnt, const nlohmann::json& request) {
  auto fail = [](const std::string& why) {
    return nlohmann::json{{"ok", false}, {"error", "client: " + why}};
  };
  std::string err;
  std::string path = adminSocketPath(mnt, &err);
  if (path.empty()) return fail(err.empty() ? "empty admin socket path" : err);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return fail("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("socket");
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    close(fd);
    return fail("connect(" + path + "): " + strerror(e));
  }
  std::string reply;
  bool ok = admin::sendMessage(fd, request.dump()) && admin::receiveMessage(fd, reply);
  close(fd);
  if (!ok) return fail("no reply to " + request.dump());
  auto j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail("reply is not a JSON object: " + reply);
  return j;
}

std::optional<uint64_t> counter(const nlohmann::json& j, std::string_view dottedPath) {
  const nlohmann::json* cur = &j;
  size_t start = 0;
  while (start <= dottedPath.size()) {
    size_t dot = dottedPath.find('.', start);
    std::string key(
        dottedPath.substr(start, dot == std::string_view::npos ? dottedPath.npos : dot - start));
    if (!cur->is_object() || !cur->contains(key)) return std::nullopt;
    cur = &(*cur)[key];
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (cur->is_number_unsigned()) return cur->get<uint64_t>();
  if (cur->is_number_integer() && cur->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(cur->get<int64_t>());
  }
  return std::nullopt;
}

std::map<std::string, uint64_t> procIo(pid_t pid) {
  std::map<std::string, uint64_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/io");
  std::string key;
  uint64_t v;
  while (in >> key >> v) {
    if (!key.empty() && key.back() == ':') key.pop_back();
    out[key] = v;
  }
  return out;
}

// ---- files -----------------------------------------------------------------

std::string randomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

void writeFile(const std::string& path, std::string_view data, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << "open " << path << ": " << strerror(errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = write(fd, data.data() + done, data.size() - done);
    ASSERT_GT(w, 0) << "write " << path << ": " << strerror(errno);
    done += static_cast<size_t>(w);
  }
  ASSERT_EQ(fchmod(fd, mode), 0);
  close(fd);
}

ReadResult readFile(const std::string& path, size_t bufSize) {
  ReadResult r;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.err = errno;
    return r;
  }
  std::string buf(bufSize, '\0');
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      r.err = errno;
      break;
    }
    if (n == 0) break;
    r.data.append(buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return r;
}

uint64_t xxh3(std::string_view data) { return cache::checksum(data.data(), data.size()); }

void mkdirs(const std::string& path, mode_t mode) {
  std::string cur;
  std::istringstream parts(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    cur += "/" + part;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      ADD_FAILURE() << "mkdir " << cur << ": " << strerror(errno);
      return;
    }
  }
}

void removeTree(const std::string& path) {
  if (path.empty()) return;
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, FTW*) {
        ::remove(p);
        return 0;
      },
      32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

namespace {
void walk(const std::string& root, const std::string& rel, bool hash, Tree& out) {
  std::string full = rel.empty() ? root : root + "/" + rel;
  struct stat st;
  if (lstat(full.c_str(), &st) != 0) {
    ADD_FAILURE() << "lstat " << full << ": " << strerror(errno);
    return;
  }
  Entry e;
  e.mode = st.st_mode;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.size = st.st_size;
  e.mtimeNs = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    ssize_t n = readlink(full.c_str(), buf, sizeof buf);
    if (n >= 0) e.target.assign(buf, static_cast<size_t>(n));
  } else if (S_ISREG(st.st_mode) && hash) {
    auto r = readFile(full);
    e.readErr = r.err;
    e.hash = xxh3(r.data);
  }
  out[rel.empty() ? "." : rel] = e;
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = opendir(full.c_str());
  if (!d) {
    ADD_FAILURE() << "opendir " << full << ": " << strerror(errno);
    return;
  }
  std::vector<std::string> names;
  while (dirent* de = readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  for (const auto& n : names) walk(root, rel.empty() ? n : rel + "/" + n, hash, out);
}
}  // namespace

Tree snapshotTree(const std::string& root, bool hashContents) {
  Tree t;
  walk(root, "", hashContents, t);
  return t;
}

std::vector<std::string> regularFiles(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& [rel, e] : snapshotTree(root, false)) {
    if (S_ISREG(e.mode)) out.push_back(rel);
  }
  return out;
}

uint64_t treeBytes(const std::string& root) {
  uint64_t n = 0;
  for (const auto& [rel, e] : snapshotTree(root, false)) {
    if (S_ISREG(e.mode)) n += static_cast<uint64_t>(e.size);
  }
  return n;
}

// ---- the fixture -------------------------------------------------------------

void MountTest::SetUp() {
  std::string why = environmentSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  enableSubreaper();
  const char* tmp = getenv("TMPDIR");
  // The pid in the name lets tools/test tell a live run's mounts from stale ones.
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/epochfs-itest-" +
                     std::to_string(getpid()) + "-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << strerror(errno);
  root_ = tmpl;
  src_ = root_ + "/src";
  mnt_ = root_ + "/mnt";
  cache_ = root_ + "/cache";
  for (const auto& d : {src_, mnt_, cache_}) ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
}

void MountTest::TearDown() {
  if (root_.empty()) return;
  for (auto it = mounted_.rbegin(); it != mounted_.rend(); ++it) {
    if (isMounted(it->mnt)) {
      EXPECT_TRUE(unmountPath(it->mnt)) << "cannot unmount " << it->mnt;
    }
  }
  for (const auto& m : mountPointsUnder(root_)) {
    EXPECT_TRUE(unmountPath(m)) << "cannot unmount " << m;
  }
  // Daemons end when their mount goes; anything still running is a leak.
  auto t0 = Clock::now();
  std::vector<pid_t> kids;
  while (!(kids = liveChildren()).empty() && secondsSince(t0) < 10) sleepMs(20);
  for (pid_t p : kids) {
    std::ifstream cmd("/proc/" + std::to_string(p) + "/cmdline");
    std::string c((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    std::replace(c.begin(), c.end(), '\0', ' ');
    ADD_FAILURE() << "process " << p << " [" << c << "] still running 10 s after its unmount; "
                  << "killing it";
    kill(p, SIGKILL);
    waitForExit(p, 5);
  }
  if (mountPointsUnder(root_).empty()) {
    removeTree(root_);
  } else {
    ADD_FAILURE() << "leaving " << root_ << " behind: still mounted";
  }
}

ProcResult MountTest::mount(const std::vector<std::string>& extra, double timeoutSec) {
  return mountAt(src_, mnt_, extra, timeoutSec);
}

ProcResult MountTest::mountAt(const std::string& src, const std::string& mnt,
                              const std::vector<std::string>& extra, double timeoutSec,
                              const SpawnOptions& opts) {
  std::vector<std::string> argv = {epochfsBinary(), src, mnt};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ProcResult r = runProcess(argv, timeoutSec, opts);
  if (isMounted(mnt)) {
    Mounted m{mnt, -1};
    if (r.exitCode == 0 && opts.identity != Identity::kNobody) {
      auto j = adminRequest(mnt, {{"cmd", admin::kCmdStatus}});
      if (auto pid = counter(j, "pid")) m.pid = static_cast<pid_t>(*pid);
    }
    std::lock_guard<std::mutex> lock(mountedMu_);
    mounted_.push_back(m);
  }
  if (r.exitCode == 0) {
    EXPECT_TRUE(isMounted(mnt)) << "epochfs exited 0 before " << mnt << " was mounted";
  }
  return r;
}

bool MountTest::unmount(const std::string& mnt) {
  pid_t pid = -1;
  for (auto it = mounted_.begin(); it != mounted_.end(); ++it) {
    if (it->mnt == mnt) {
      pid = it->pid;
      mounted_.erase(it);
      break;
    }
  }
  if (!unmountPath(mnt)) return false;
  lastDaemonStatus_.reset();
  // A shared daemon (one process serving several mounts) keeps serving the others.
  const bool shared = std::any_of(mounted_.begin(), mounted_.end(),
                                  [pid](const Mounted& m) { return m.pid == pid; });
  if (pid > 0 && !shared) {
    lastDaemonStatus_ = waitForExit(pid, 10);
    if (!lastDaemonStatus_) {
      ADD_FAILURE() << "daemon " << pid << " still running 10 s after unmounting " << mnt;
      return false;
    }
  }
  return true;
}

nlohmann::json MountTest::admin(const std::string& cmd, const std::string& mnt) {
  return adminRequest(mnt.empty() ? mnt_ : mnt, {{"cmd", cmd}});
}

pid_t MountTest::daemonPid(const std::string& mnt) {
  auto pid = counter(admin("status", mnt), "pid");
  return pid ? static_cast<pid_t>(*pid) : -1;
}

void MountTest::dropCaches(const std::string& mnt) {
  if (!dropPageCache()) fadviseDontNeedTree(mnt.empty() ? mnt_ : mnt);
}

::testing::AssertionResult oneEpochfsLine(const ProcResult& r,
                                          const std::vector<std::string>& anyOf) {
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  if (lines.size() != 1) {
    return ::testing::AssertionFailure()
           << "expected exactly one stderr line, got " << lines.size() << ": " << r.describe();
  }
  if (lines[0].rfind("epochfs: ", 0) != 0 || lines[0].size() < std::strlen("epochfs: ") + 4) {
    return ::testing::AssertionFailure()
           << "stderr line does not start with 'epochfs: <reason>': " << r.describe();
  }
  if (anyOf.empty()) return ::testing::AssertionSuccess();
  std::string lower = toLower(lines[0]);
  for (const auto& w : anyOf) {
    if (lower.find(toLower(w)) != std::string::npos) return ::testing::AssertionSuccess();
  }
  std::string want;
  for (const auto& w : anyOf) want += "'" + w + "' ";
  return ::testing::AssertionFailure() << "reason names none of " << want << ": " << lines[0];
}

}  // namespace epochfs::itest
