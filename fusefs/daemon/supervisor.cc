#include "fusefs/daemon/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "fusefs/daemon/supervisor_link.h"
#include "fusefs/mount_table.h"

namespace epochfs::fusefs {

namespace {

constexpr int kMaxCrashes = 5;  // within kCrashWindow, then give up
constexpr auto kCrashWindow = std::chrono::seconds(60);
constexpr auto kRestartDelay = std::chrono::milliseconds(100);

sigset_t handledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&set, s);
  return set;
}

// True if an epochfs FUSE mount sits on `path`.
bool isEpochfsMount(const std::string& path) {
  for (const MountEntry& m : MountTable::read()) {
    if (m.mountPoint == path && m.fstype == "fuse.epochfs") return true;
  }
  return false;
}

void lazyUnmount(const std::string& path) {
  if (geteuid() == 0) {
    if (umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
      spdlog::warn("supervisor: umount {}: {}", path, std::strerror(errno));
    }
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    execlp("fusermount3", "fusermount3", "-u", "-z", "-q", path.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
}

std::string describeStatus(pid_t pid, int status) {
  const std::string who = "worker pid " + std::to_string(pid);
  if (WIFSIGNALED(status)) {
    return who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

Supervisor::Supervisor(const MountOptions& options, std::vector<std::string> argv, int readyFd)
    : options_(options), argv_(std::move(argv)), readyFd_(readyFd) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  // The path, not the inode: an upgrade starts whatever binary is there now.
  exePath_ = n > 0 ? std::string(buf, static_cast<size_t>(n)) : argv_.at(0);
  cwdFd_ = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

Supervisor::~Supervisor() {
  explicit_bzero(handoff_.data(), handoff_.size());
  for (int fd : {cwdFd_, signalFd_, channel_, readyFd_, namespaceFd_, closeWhenStarted_}) {
    if (fd >= 0) close(fd);
  }
  for (const HeldMount& m : mounts_) close(m.fd);
}

int Supervisor::run() {
  sigset_t set = handledSignals();
  sigset_t original;
  sigprocmask(SIG_BLOCK, &set, &original);
  signalFd_ = signalfd(-1, &set, SFD_CLOEXEC);
  if (signalFd_ < 0 || !spawnWorker()) {
    reportStart("cannot start the daemon process: " + std::string(std::strerror(errno)));
    return 1;
  }
  for (;;) {
    pollfd fds[2] = {{signalFd_, POLLIN, 0}, {channel_, POLLIN, 0}};
    if (poll(fds, channel_ >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (channel_ >= 0 && fds[1].revents != 0) readChannel();
    if ((fds[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo si;
    if (read(signalFd_, &si, sizeof si) != sizeof si) continue;
    if (si.ssi_signo == SIGCHLD) {
      bool done = false;
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid != worker_) continue;
        lastPid_ = pid;
        worker_ = -1;
        if (channel_ >= 0) readChannel();  // what it said before it ended
        if (channel_ >= 0) close(channel_);
        channel_ = -1;
        if (!onWorkerExit(status)) done = true;
      }
      if (done) break;
    } else if (si.ssi_signo == SIGUSR2) {
      if (worker_ > 0 && served_) {
        spdlog::info("supervisor: SIGUSR2: restarting pid {} with {}", worker_, exePath_);
        kill(worker_, SIGUSR2);
      }
    } else {  // SIGTERM, SIGINT, SIGHUP: unmount
      stopping_ = true;
      sd_notify(0, "STOPPING=1");
      if (worker_ <= 0) break;
      kill(worker_, SIGTERM);
    }
  }
  unmountAndClose();
  sigprocmask(SIG_SETMASK, &original, nullptr);
  return exitCode_;
}

bool Supervisor::spawnWorker() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  std::vector<char*> argv;
  for (auto& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string held = encodeHeldMounts(mounts_);
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return false;
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (cwdFd_ >= 0 && fchdir(cwdFd_) != 0) _exit(127);
    fcntl(sv[1], F_SETFD, 0);
    setenv(kEnvChannel, std::to_string(sv[1]).c_str(), 1);
    if (!mounts_.empty()) {
      for (const HeldMount& m : mounts_) fcntl(m.fd, F_SETFD, 0);
      setenv(kEnvMounts, held.c_str(), 1);
      setenv(kEnvFingerprint, fingerprint_.c_str(), 1);
      setenv(kEnvResumeMountpoint, options_.mountpoint.c_str(), 1);
      if (namespaceFd_ >= 0) {
        fcntl(namespaceFd_, F_SETFD, 0);
        setenv(kEnvNamespaceFd, std::to_string(namespaceFd_).c_str(), 1);
      }
    }
    if (!handoff_.empty()) {
      // Fits the pipe's buffer (64 KiB): written whole before the worker runs.
      int p[2];
      if (pipe(p) != 0 ||
          write(p[1], handoff_.data(), handoff_.size()) != static_cast<ssize_t>(handoff_.size())) {
        _exit(127);
      }
      close(p[1]);
      explicit_bzero(handoff_.data(), handoff_.size());
      setenv(kEnvHandoff, std::to_string(p[0]).c_str(), 1);
    }
    execv(exePath_.c_str(), argv.data());
    _exit(127);
  }
  close(sv[1]);
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  channel_ = sv[0];
  worker_ = pid;
  spdlog::info("supervisor: started worker pid {} ({})", pid,
               mounts_.empty() ? "mounting" : "resuming the mounts");
  return true;
}

void Supervisor::readChannel() {
  for (;;) {
    char buf[8192];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(channel_, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR)) continue;
    if (n <= 0) {
      if (n == 0 || errno != EAGAIN) {
        close(channel_);
        channel_ = -1;
      }
      return;
    }
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      }
    }
    const std::string text(buf, static_cast<size_t>(n));
    const size_t nl = text.find('\n');
    const std::string kind = text.substr(0, nl);
    const std::string payload = nl == std::string::npos ? "" : text.substr(nl + 1);
    if (kind == "mount" && fd >= 0) {
      // encodeHeldMount; the descriptor came beside it.
      if (auto m = decodeHeldMount(payload)) {
        m->fd = fd;
        spdlog::info("supervisor: holds {} ({} mount(s))", m->mountpoint, mounts_.size() + 1);
        mounts_.push_back(std::move(*m));
        fd = -1;
      }
    } else if (kind == "unmounted") {
      const std::string mnt = fromHex(payload);
      for (auto it = mounts_.begin(); it != mounts_.end(); ++it) {
        if (it->mountpoint != mnt) continue;
        // Gone already (umount), or ended by `epochctl unmount`: unmounted here.
        pollfd p{it->fd, 0, 0};
        if (!(poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0)) lazyUnmount(mnt);
        close(it->fd);
        mounts_.erase(it);
        spdlog::info("supervisor: {} went away; {} mount(s) held", mnt, mounts_.size());
        break;
      }
    } else if (kind == "namespace" && fd >= 0) {
      // Only a sealed memfd: its contents cannot change after the check.
      constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
      const int seals = fcntl(fd, F_GET_SEALS);
      if (seals >= 0 && (seals & kSeals) == kSeals) {
        if (namespaceFd_ >= 0) close(namespaceFd_);
        namespaceFd_ = fd;
        fd = -1;
        spdlog::info("supervisor: worker pid {} handed over its namespace", worker_);
      } else {
        spdlog::warn("supervisor: worker pid {} sent a namespace that is not a sealed memfd",
                     worker_);
      }
    } else if (kind == "ready") {
      if (!served_) {
        served_ = true;
        fingerprint_ = payload;
        reportStart("ok");
        // Under systemd (Type=notify, docs/DEPLOY.md): the supervisor is the
        // unit's main process; without NOTIFY_SOCKET this does nothing.
        sd_notifyf(0, "READY=1\nSTATUS=serving %s", options_.mountpoint.c_str());
      } else {
        spdlog::info("supervisor: worker pid {} serves {} mount(s) again", worker_, mounts_.size());
        sd_notifyf(0, "STATUS=serving %s (worker restarted)", options_.mountpoint.c_str());
      }
    } else if (kind == "error") {
      lastError_ = payload;
    }
    if (fd >= 0) close(fd);
  }
}

bool Supervisor::onWorkerExit(int status) {
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!served_) {  // the first worker never served: epochfs fails
    reportStart(!lastError_.empty() ? lastError_ : "the daemon exited during start-up");
    exitCode_ = 1;
    return false;
  }
  if (clean || stopping_) {
    exitCode_ = 0;
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitNamespaceChanged) {
    spdlog::error(
        "supervisor: the source changed since the mount; a new daemon cannot "
        "resume it: unmounting {}",
        options_.mountpoint);
    exitCode_ = 1;
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitRestart) {
    spdlog::info("supervisor: upgrade: starting {}", exePath_);
    return spawnWorker();
  }
  const auto now = std::chrono::steady_clock::now();
  crashes_.push_back(now);
  while (!crashes_.empty() && now - crashes_.front() > kCrashWindow) crashes_.pop_front();
  if (crashes_.size() > static_cast<size_t>(kMaxCrashes)) {
    spdlog::error("supervisor: {}: {} abnormal ends within {} s; giving up, unmounting {}",
                  describeStatus(lastPid_, status), crashes_.size(), kCrashWindow.count(),
                  options_.mountpoint);
    exitCode_ = 1;
    return false;
  }
  spdlog::warn("supervisor: {}{}; restarting it on the same mount",
               describeStatus(lastPid_, status), lastError_.empty() ? "" : " (" + lastError_ + ")");
  lastError_.clear();
  std::this_thread::sleep_for(kRestartDelay);
  return spawnWorker();
}

void Supervisor::reportStart(const std::string& message) {
  if (message != "ok" && startError_.empty()) startError_ = message;
  if (closeWhenStarted_ >= 0) close(closeWhenStarted_);
  closeWhenStarted_ = -1;
  if (readyFd_ < 0) return;
  ssize_t w = write(readyFd_, message.data(), message.size());
  (void)w;
  close(readyFd_);
  readyFd_ = -1;
  if (message == "ok" && !options_.foreground) {
    if (chdir("/") != 0) spdlog::debug("supervisor: chdir / failed");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      close(null);
    }
  }
}

void Supervisor::unmountAndClose() {
  for (const HeldMount& m : mounts_) {
    // POLLERR: the connection is already gone (unmounted, or aborted).
    pollfd p{m.fd, 0, 0};
    const bool gone = poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0;
    if (!gone) lazyUnmount(m.mountpoint);
    close(m.fd);
  }
  if (!mounts_.empty()) {
    mounts_.clear();
  } else if (!served_ && isEpochfsMount(options_.mountpoint)) {
    lazyUnmount(options_.mountpoint);  // a worker that died between mount and hand-over
  }
  if (!served_ && startError_.empty()) reportStart("the daemon exited during start-up");
}

}  // namespace epochfs::fusefs
