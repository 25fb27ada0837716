#include "tests/integration/admin_test_util.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace epochfs::itest {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Waits for pid, killing it after the timeout.
void reap(pid_t pid, double timeoutSec, Clock::time_point t0, ProcResult& r) {
  int status = 0;
  for (;;) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (since(t0) > timeoutSec) {
      kill(pid, SIGKILL);
      // A child stuck in a FUSE request its daemon never answers cannot die
      // until the daemon does: give up on it after 10 s rather than hang.
      const auto killedAt = Clock::now();
      while (waitpid(pid, &status, WNOHANG) != pid && since(killedAt) < 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      r.timedOut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = since(t0);
  if (!r.timedOut && WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.termSignal = WTERMSIG(status);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool typeMatches(const nlohmann::json& v, const std::string& t) {
  if (t == "any") return true;
  if (t == "string") return v.is_string();
  if (t == "uint")
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  if (t == "int") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "bool") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

}  // namespace

std::string ctlBinary() {
  const char* dir = getenv("EPOCHFS_BIN_DIR");
  return std::string(dir && *dir ? dir : EPOCHFS_BIN_DIR) + "/epochctl";
}

ProcResult runCtl(const std::vector<std::string>& args, double timeoutSec,
                  const std::optional<Creds>& creds, const std::string& input) {
  std::vector<std::string> argv = {ctlBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto c = cArgv(argv);
  const int out = memfd_create("ctl-out", MFD_CLOEXEC);
  const int err = memfd_create("ctl-err", MFD_CLOEXEC);
  const int in = memfd_create("ctl-in", MFD_CLOEXEC);
  if (!input.empty() &&
      write(in, input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    ADD_FAILURE() << "cannot stage stdin";
  }
  lseek(in, 0, SEEK_SET);
  ProcResult r;
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (creds) {
      if (setgroups(creds->groups.size(), creds->groups.data()) != 0 || setgid(creds->gid) != 0 ||
          setuid(creds->uid) != 0) {
        _exit(126);
      }
    }
    execv(c[0], c.data());
    _exit(127);
  }
  reap(pid, timeoutSec, t0, r);
  r.out = readAllFrom(out);
  r.err = readAllFrom(err);
  close(out);
  close(err);
  close(in);
  return r;
}

ProcResult runCtlOnPty(const std::vector<std::string>& args, double timeoutSec) {
  std::vector<std::string> argv = {ctlBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto c = cArgv(argv);
  ProcResult r;
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    r.err = "no pty";
    return r;
  }
  const std::string slave = ptsname(master);
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    const int s = open(slave.c_str(), O_RDWR);
    if (s < 0) _exit(126);
    ioctl(s, TIOCSCTTY, 0);
    dup2(s, 0);
    dup2(s, 1);
    dup2(s, 2);
    execv(c[0], c.data());
    _exit(127);
  }
  // Drain the master while the child runs (a full pty would block it).
  int status = 0;
  bool exited = false;
  while (!exited) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 20) > 0 && (p.revents & POLLIN)) {
      char buf[4096];
      const ssize_t n = read(master, buf, sizeof buf);
      if (n > 0) r.out.append(buf, static_cast<size_t>(n));
    }
    if (waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (!exited && since(t0) > timeoutSec) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timedOut = true;
      exited = true;
    }
  }
  for (;;) {  // what is left
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) break;
    char buf[4096];
    const ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, static_cast<size_t>(n));
  }
  close(master);
  r.seconds = since(t0);
  if (!r.timedOut && WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  return r;
}

nlohmann::json jsonOf(const ProcResult& r) {
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

std::string shapeErrors(const nlohmann::json& v, const nlohmann::json& shape,
                        const std::string& where) {
  std::string errors;
  if (shape.is_string()) {
    std::stringstream alts(shape.get<std::string>());
    std::string t;
    while (std::getline(alts, t, '|')) {
      if (typeMatches(v, t)) return "";
    }
    return where + ": expected " + shape.get<std::string>() + ", got " + v.dump().substr(0, 80) +
           "\n";
  }
  if (shape.is_object()) {
    if (!v.is_object()) return where + ": expected an object, got " + v.dump().substr(0, 80) + "\n";
    for (const auto& [k, s] : shape.items()) {
      if (!v.contains(k)) {
        errors += where + "." + k + ": missing\n";
      } else {
        errors += shapeErrors(v[k], s, where + "." + k);
      }
    }
    return errors;
  }
  if (shape.is_array()) {
    if (!v.is_array()) return where + ": expected an array, got " + v.dump().substr(0, 80) + "\n";
    if (shape.empty()) return "";
    for (size_t i = 0; i < v.size(); ++i) {
      errors += shapeErrors(v[i], shape[0], where + "[" + std::to_string(i) + "]");
    }
    return errors;
  }
  return where + ": bad shape " + shape.dump() + "\n";
}

std::string expositionErrors(const std::string& text) {
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$)");
  std::string errors;
  std::set<std::string> typed, helped, finished;
  std::string current, currentType;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string at = "line " + std::to_string(n) + ": ";
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, rest;
      f >> name >> rest;
      const bool type = line[2] == 'T';
      auto& seen = type ? typed : helped;
      if (!seen.insert(name).second)
        errors += at + "second " + (type ? "TYPE" : "HELP") + " for " + name + "\n";
      if (type) {
        if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
            rest != "untyped") {
          errors += at + "unknown type " + rest + "\n";
        }
        if (!current.empty()) finished.insert(current);
        current = name;
        currentType = rest;
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    if (!std::regex_match(line, m, kSample)) {
      errors += at + "malformed sample: " + line + "\n";
      continue;
    }
    std::string name = m[1].str();
    std::string family = name;
    if (currentType == "histogram") {
      for (const char* suffix : {"_bucket", "_count", "_sum"}) {
        const std::string s = suffix;
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
            name.substr(0, name.size() - s.size()) == current) {
          family = current;
        }
      }
    }
    if (family != current)
      errors += at + name + " outside its family (after TYPE " + current + ")\n";
    if (finished.count(family)) errors += at + name + ": family not contiguous\n";
  }
  return errors;
}

int connectAdmin(const std::string& mnt) {
  std::string path = adminSocketPath(mnt);
  if (path.empty()) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof addr.sun_path - 1));
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

::testing::AssertionResult oneErrorLine(const ProcResult& r, const std::string& word) {
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  if (lines.size() != 1 || lines[0].rfind("epochctl: error: ", 0) != 0) {
    return ::testing::AssertionFailure()
           << "expected one 'epochctl: error: ...' line: " << r.describe();
  }
  if (lower(lines[0]).find(lower(word)) == std::string::npos) {
    return ::testing::AssertionFailure() << "'" << word << "' not in: " << lines[0];
  }
  return ::testing::AssertionSuccess();
}

}  // namespace epochfs::itest
