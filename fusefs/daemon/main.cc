// epochfs SOURCE MOUNTPOINT [options]: mounts SOURCE read-only at MOUNTPOINT.
// Daemonizes by default and exits 0 only once the mount is ready; any failure
// exits 1 with one line "epochfs: error: REASON" on stderr.
// Processes (docs/ARCHITECTURE.md): by default the daemonized child is a
// Supervisor that runs this binary again as the worker serving the mount
// (started with the SupervisorLink environment); --no-supervisor serves in
// the daemonized child itself.
#define FUSE_USE_VERSION 312
#include <fcntl.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fusefs/daemon/daemon.h"
#include "fusefs/daemon/daemon_registry.h"
#include "fusefs/daemon/memory_limit.h"
#include "fusefs/daemon/mount_options.h"
#include "fusefs/daemon/mountpoint_check.h"
#include "fusefs/daemon/stop_signals.h"
#include "fusefs/daemon/supervisor.h"
#include "fusefs/daemon/supervisor_link.h"
#include "fusefs/libfuse_log.h"
#include "fusefs/version_info.h"
#include "transport/s3/credential_chain.h"

namespace {

using epochfs::fusefs::MountOptions;
using epochfs::transport::s3::ResolvedCredentials;

int fail(const std::string& reason) {
  std::fprintf(stderr, "epochfs: error: %s\n", reason.c_str());
  return 1;
}

void setupLogging(const MountOptions& o) {
  std::shared_ptr<spdlog::logger> logger;
  if (!o.logFile.empty()) {
    logger = spdlog::basic_logger_mt("epochfs", o.logFile);
  } else if (o.foreground) {
    logger = spdlog::stderr_logger_mt("epochfs");
  } else {
    logger = spdlog::syslog_logger_mt("epochfs", "epochfs", LOG_PID);
  }
  logger->set_level(spdlog::level::from_str(o.logLevel));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  epochfs::fusefs::routeLibfuseLog();
}

// Many files may be open at once through the mount and the admin socket: raise
// the soft descriptor limit to the hard one.
void raiseFileLimit() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

void detachStdio() {
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return;
  dup2(null, STDIN_FILENO);
  dup2(null, STDOUT_FILENO);
  dup2(null, STDERR_FILENO);
  close(null);
}

// The AWS tools' secrets in the environment, wiped in place and removed
// before any child starts: /proc/PID/environ shows the process's initial
// environment block, which unsetenv() leaves as it was.
void scrubAwsEnvironment() {
  for (const char* name :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}) {
    const size_t n = std::strlen(name);
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
        explicit_bzero(*e + n + 1, std::strlen(*e + n + 1));
      }
    }
    unsetenv(name);
  }
}

// An s3:// mount's credentials: a worker reads them from its supervisor's
// pipe; the first process resolves them (the AWS chain) and scrubs them from
// its environment.
epochfs::cache::Result<ResolvedCredentials> s3Credentials(const MountOptions& o,
                                                          epochfs::fusefs::SupervisorLink* link) {
  if (link != nullptr) {
    std::string bytes = link->takeHandoff();
    auto r = epochfs::transport::s3::decodeCredentials(bytes);
    explicit_bzero(bytes.data(), bytes.size());
    return r;
  }
  epochfs::transport::s3::CredentialRequest req;
  req.credentialsFile = o.s3->credentialsFile;
  req.profile = o.s3->profile;
  req.noSign = o.s3->noSign;
  auto r = epochfs::transport::s3::resolveCredentials(req);
  scrubAwsEnvironment();
  return r;
}

// A second mount of a dataset a daemon of this user already serves: that
// daemon mounts it too (fusefs/daemon/daemon_registry.h). Returns the exit
// code when joined; nullopt: start a daemon of this mount's own, `registry`
// then holding the start lock when others may join it (until this daemon
// serves), and `reason` saying why a running daemon was not joined.
std::optional<int> joinRunningDaemon(const MountOptions& o,
                                     const std::optional<ResolvedCredentials>& s3,
                                     std::optional<epochfs::fusefs::DaemonRegistry>* registry,
                                     std::string* reason) {
  using epochfs::fusefs::DaemonRegistry;
  const auto* credentials = s3 && s3->credentials ? &*s3->credentials : nullptr;
  auto r = DaemonRegistry::forDataset(o, credentials);
  if (!r.isOk()) return std::nullopt;  // no registry: every mount has its own daemon
  const std::string notShared = epochfs::fusefs::whyNotShared(o);
  if (!notShared.empty()) {
    if (!o.ownDaemon && r->read()) *reason = notShared;
    return std::nullopt;
  }
  if (!r->lockStart().isOk()) return std::nullopt;
  if (auto live = r->read(); live && o.foreground) {
    *reason = "-f (a foreground mount keeps a daemon of its own)";
  } else if (live) {
    const std::string differs =
        epochfs::fusefs::shapeDifference(epochfs::fusefs::daemonShape(o), live->shape);
    if (differs.empty()) {
      auto joined =
          DaemonRegistry::join(*live, o.mountpoint, o.allowOther, o.owner, o.torchOrderText);
      if (joined.isOk()) return 0;
      *reason = "the daemon serving it (pid " + std::to_string(live->pid) +
                ") did not take this mount: " + joined.message();
    } else {
      *reason = differs;
    }
  }
  registry->emplace(std::move(r).value());
  return std::nullopt;
}

// A supervisor's worker: serves the mount (mounting it, or resuming the one
// the supervisor holds) and reports to the supervisor instead of a pipe.
int runWorker(const MountOptions& options, epochfs::fusefs::SupervisorLink& link,
              std::optional<ResolvedCredentials> s3) {
  using epochfs::fusefs::Daemon;
  setupLogging(options);
  Daemon daemon(options);
  // Before any thread starts; SIGUSR2 restarts (upgrade).
  epochfs::fusefs::StopSignals signals(true, [&daemon](bool restart) { daemon.stop(restart); });
  if (s3) daemon.setS3Credentials(std::move(s3->credentials), s3->origin, s3->file);
  Daemon::Supervision sup;
  sup.resume = link.resume();
  sup.expectedFingerprint = link.expectedFingerprint();
  sup.namespaceFd = link.takeNamespaceFd();
  sup.sendNamespace = [&link](int memfd) { link.sendNamespace(memfd); };
  sup.sendMount = [&link](const epochfs::fusefs::HeldMount& m) { link.sendMount(m); };
  sup.sendUnmounted = [&link](const std::string& mnt) { link.sendUnmounted(mnt); };
  daemon.setSupervision(std::move(sup));
  auto started = daemon.start();
  if (!started.isOk()) {
    // With -f the supervisor prints it as the one "epochfs: error:" line.
    if (!options.foreground) spdlog::error("start: {}", started.message());
    link.sendError(started.message());
    return daemon.namespaceChanged() ? epochfs::fusefs::kWorkerExitNamespaceChanged : 1;
  }
  // The caller's stdio is released before "ready" lets the epochfs command return.
  if (!options.foreground) {
    if (chdir("/") != 0) spdlog::warn("chdir / failed");
    detachStdio();
  }
  // Before "ready": once the mount is up, the supervisor can restart a worker
  // from it (one that adopted its namespace has nothing new to hand over).
  if (daemon.namespaceSource() != "handed over") daemon.publishNamespace();
  daemon.publishShared();  // before "ready": a mount waiting on the start lock then joins
  link.sendReady(daemon.namespaceFingerprint());
  spdlog::info("{} {} on {} (pid {}, namespace: {})", link.restarted() ? "resumed" : "mounted",
               options.source, options.mountpoint, getpid(), daemon.namespaceSource());
  signals.serving();
  const int rc = daemon.run();
  spdlog::info("worker pid {} ends with {}", getpid(), rc);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  bool exitNow = false;
  auto parsed = epochfs::fusefs::parseMountOptions(argc, argv, &exitNow);
  if (exitNow) {
    if (parsed.isOk() && parsed.value().versionRequested) {
      std::fputs(epochfs::fusefs::versionText().c_str(), stdout);
    }
    return 0;
  }
  if (!parsed.isOk()) return fail(parsed.status().message());
  MountOptions options = std::move(parsed).value();
  // Both the supervised worker and the single-process daemon serve chunks:
  // bound the allocator before any thread or chunk exists.
  epochfs::fusefs::boundAllocatorRetention();
  auto link = epochfs::fusefs::SupervisorLink::fromEnvironment();
  std::optional<ResolvedCredentials> s3;
  if (options.s3) {
    auto c = s3Credentials(options, link.get());
    if (!c.isOk()) {
      if (link) link->sendError(c.status().message());
      return fail(c.status().message());
    }
    s3 = std::move(c).value();
  }
  if (link) {
    raiseFileLimit();
    return runWorker(options, *link, std::move(s3));
  }
  if (auto s = epochfs::fusefs::checkMountable(options); !s.isOk()) return fail(s.message());
  std::optional<epochfs::fusefs::DaemonRegistry> registry;
  std::string ownDaemonReason;  // printed once this mount's own daemon serves
  if (auto joined = joinRunningDaemon(options, s3, &registry, &ownDaemonReason)) return *joined;
  raiseFileLimit();

  // Daemon mode: the child does all the work (threads start after fork) and
  // reports "ok" or the reason over a pipe; the parent exits with that.
  int ready[2] = {-1, -1};
  if (!options.foreground) {
    if (pipe2(ready, O_CLOEXEC) != 0) return fail("pipe failed");
    pid_t pid = fork();
    if (pid < 0) return fail("fork failed");
    if (pid > 0) {
      close(ready[1]);
      std::string msg;
      char buf[512];
      ssize_t n;
      while ((n = read(ready[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
      if (msg != "ok") return fail(msg.empty() ? "the daemon exited during start-up" : msg);
      if (!ownDaemonReason.empty()) {
        std::fprintf(stderr, "epochfs: %s: own daemon: %s\n", options.source.c_str(),
                     ownDaemonReason.c_str());
      }
      return 0;  // the start lock goes with this process: a waiting mount now joins
    }
    close(ready[0]);
    // The child's copy only: the parent holds the start lock until it exits.
    if (registry) registry->unlockStart();
    setsid();
  }

  setupLogging(options);
  if (options.supervise) {
    // The supervisor forks the workers: it starts no threads of its own.
    epochfs::fusefs::Supervisor supervisor(options, std::vector<std::string>(argv, argv + argc),
                                           options.foreground ? -1 : ready[1]);
    if (s3) supervisor.setHandoff(epochfs::transport::s3::encodeCredentials(*s3));
    if (registry) supervisor.closeWhenStarted(registry->takeLock());
    s3.reset();
    const int rc = supervisor.run();
    if (options.foreground && !supervisor.startError().empty())
      return fail(supervisor.startError());
    return rc;
  }
  epochfs::fusefs::Daemon daemon(options);
  // Before any thread starts (SIGUSR2 keeps its default action: no supervisor).
  epochfs::fusefs::StopSignals signals(false, [&daemon](bool restart) { daemon.stop(restart); });
  if (s3) daemon.setS3Credentials(std::move(s3->credentials), s3->origin, s3->file);
  auto started = daemon.start();
  if (!started.isOk()) {
    if (options.foreground) return fail(started.message());
    ssize_t w = write(ready[1], started.message().data(), started.message().size());
    (void)w;
    return 1;
  }
  spdlog::info("mounted {} on {}", options.source, options.mountpoint);
  daemon.publishShared();
  registry.reset();         // -f: the start lock goes once this daemon serves
  sd_notify(0, "READY=1");  // --no-supervisor under systemd: this is the main process
  if (!options.foreground) {
    ssize_t w = write(ready[1], "ok", 2);
    (void)w;
    close(ready[1]);
    if (chdir("/") != 0) spdlog::warn("chdir / failed");
    detachStdio();
  }
  signals.serving();
  int rc = daemon.run();
  spdlog::info("unmounted {}", options.mountpoint);
  return rc;
}
