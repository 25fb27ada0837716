// StopSignals: the daemon's one handler of the signals that end it — SIGTERM,
// SIGINT, SIGHUP and, for a supervised worker, SIGUSR2 (a restart). Made in
// main before any other thread starts, it blocks them in every thread and
// reads them from a signalfd on a thread of its own, which calls
// `stop(restart)`; so no handler is tied to one FUSE session (libfuse's
// fuse_set_signal_handlers keeps a single static session), and a daemon with
// several sessions stops them all. Until serving() is called a signal ends
// the process at once, as the default action did (a long snapshot walk is
// not waited for). SIGPIPE is ignored from construction on.
//
// Threading: stop runs on the signal thread; serving() from any thread.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace epochfs::fusefs {

class StopSignals {
 public:
  using Stop = std::function<void(bool restart)>;
  // `restartOnUsr2`: SIGUSR2 calls stop(true) (a supervised worker); else it
  // keeps its default action.
  StopSignals(bool restartOnUsr2, Stop stop);
  // Ends the thread and restores the signal mask.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // From now on a signal calls stop() instead of ending the process.
  void serving() { serving_.store(true); }

 private:
  void run();

  Stop stop_;
  sigset_t set_{};
  sigset_t original_{};
  int signalFd_ = -1;
  int wakeFd_ = -1;  // an eventfd: the destructor ends run()
  std::atomic<bool> serving_{false};
  std::thread thread_;
};

}  // namespace epochfs::fusefs
