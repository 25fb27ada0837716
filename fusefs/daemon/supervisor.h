// Supervisor: the parent process of an epochfs mount (the default; off with
// --no-supervisor). It runs the daemon proper as a child process, the
// "worker" (this binary, executed again), and keeps a copy of each mount's
// /dev/fuse descriptor (the first, and every mount that joined the worker
// later: docs/ARCHITECTURE.md "One daemon, several mounts"), so the kernel
// connections outlive the worker:
// - the worker is killed or crashes: a new worker is started on the same
//   descriptor; readers wait instead of seeing ENOTCONN;
// - the worker exits with kWorkerExitRestart (`epochctl upgrade`, or SIGUSR2
//   to the supervisor): the binary on disk is started again, same mount;
// - the worker exits 0 (every mount gone, SIGTERM, `epochctl unmount`), or
//   SIGTERM/SIGINT/SIGHUP reach the supervisor: it unmounts them and exits.
// Each worker hands over its namespace (a sealed memfd, kept, the latest
// only) and a restarted one gets it, so it serves without walking or listing
// the source again.
// Single-threaded: signals are read from a signalfd next to the channels.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "fusefs/daemon/mount_options.h"
#include "fusefs/daemon/supervisor_link.h"

namespace epochfs::fusefs {

class Supervisor {
 public:
  // `argv`: the command line to run a worker with (argv[0] is replaced by
  // the binary's absolute path). `readyFd`: where to write "ok" once the first
  // worker serves, or the one-line reason it failed (-1: none).
  Supervisor(const MountOptions& options, std::vector<std::string> argv, int readyFd);
  ~Supervisor();

  // Bytes each worker gets on a pipe (kEnvHandoff), never in its environment:
  // an S3 mount's credentials. Wiped when the supervisor ends.
  void setHandoff(std::string bytes) { handoff_ = std::move(bytes); }
  // A descriptor to close once the first worker serves or failed: a -f
  // mount's start lock (fusefs/daemon/daemon_registry.h; -1: none).
  void closeWhenStarted(int fd) { closeWhenStarted_ = fd; }

  // Runs until the mount is gone. Returns the exit code of the process.
  int run();
  // Why the first worker did not start ("" if it did).
  const std::string& startError() const { return startError_; }

 private:
  bool spawnWorker();
  void readChannel();
  // The worker ended with wait status `status`: false when the supervisor is done.
  bool onWorkerExit(int status);
  void reportStart(const std::string& message);
  void unmountAndClose();

  MountOptions options_;
  std::vector<std::string> argv_;
  std::string exePath_;
  int cwdFd_ = -1;  // workers start where epochfs was started (relative paths)
  int readyFd_;
  int signalFd_ = -1;
  int channel_ = -1;  // supervisor's end of the current worker's socket
  int closeWhenStarted_ = -1;
  std::vector<HeldMount> mounts_;  // our copies of the mounts' /dev/fuse descriptors
  std::string handoff_;
  std::string fingerprint_;  // of the first worker's namespace
  int namespaceFd_ = -1;     // the latest namespace image (sealed memfd), for the next worker
  std::string lastError_;
  std::string startError_;
  pid_t worker_ = -1;
  pid_t lastPid_ = -1;     // the worker that ended last
  bool served_ = false;    // a worker reported ready at least once
  bool stopping_ = false;  // a stop signal arrived
  int exitCode_ = 0;
  std::deque<std::chrono::steady_clock::time_point> crashes_;  // for the crash-loop limit
};

}  // namespace epochfs::fusefs
