#include "fusefs/daemon/stop_signals.h"

#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>

namespace epochfs::fusefs {

StopSignals::StopSignals(bool restartOnUsr2, Stop stop) : stop_(std::move(stop)) {
  signal(SIGPIPE, SIG_IGN);
  sigemptyset(&set_);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set_, s);
  if (restartOnUsr2) sigaddset(&set_, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set_, &original_);
  signalFd_ = signalfd(-1, &set_, SFD_CLOEXEC);
  wakeFd_ = eventfd(0, EFD_CLOEXEC);
  if (signalFd_ < 0 || wakeFd_ < 0) {
    // Without them the signals keep their default action: the process ends.
    spdlog::warn("cannot read stop signals ({}): they end the daemon at once",
                 std::strerror(errno));
    pthread_sigmask(SIG_SETMASK, &original_, nullptr);
    return;
  }
  thread_ = std::thread([this] { run(); });
}

StopSignals::~StopSignals() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wakeFd_, &one, sizeof one);
    thread_.join();
  }
  for (int fd : {signalFd_, wakeFd_})
    if (fd >= 0) close(fd);
  pthread_sigmask(SIG_SETMASK, &original_, nullptr);
}

void StopSignals::run() {
  for (;;) {
    pollfd fds[2] = {{signalFd_, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    signalfd_siginfo si;
    if (read(signalFd_, &si, sizeof si) != sizeof si) continue;
    const int sig = static_cast<int>(si.ssi_signo);
    if (!serving_.load()) {
      // Before the mount serves: the default action, at once.
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      raise(sig);
      continue;  // not reached for these signals
    }
    spdlog::info("signal {} ({}): stopping{}", sig, strsignal(sig),
                 sig == SIGUSR2 ? " for a restart" : "");
    stop_(sig == SIGUSR2);
  }
}

}  // namespace epochfs::fusefs
