// Daemon: the FUSE sessions it serves — the first mount, the
// ones that joined (fusefs/daemon/daemon_registry.h) and those a restart
// resumes — their admin sockets, and run() over them.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "fusefs/daemon/daemon.h"
#include "fusefs/mount_table.h"

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;

namespace {

// Raises the kernel's read-ahead for this mount (its backing_dev_info, named
// by the mount's device number in /proc/self/mountinfo) to the largest FUSE
// read, so sequential readers of shards send 1 MiB requests instead of 128 KiB
// ones. Best effort: needs root.
void raiseKernelReadAhead(const std::string& mountpoint) {
  for (const MountEntry& m : MountTable::read()) {
    if (m.mountPoint != mountpoint) continue;
    std::ofstream ra("/sys/class/bdi/" + m.device + "/read_ahead_kb");
    ra << 1024;
    if (!ra.flush()) spdlog::debug("cannot raise read_ahead_kb for {}", m.device);
  }
}

}  // namespace

FuseServer::Config Daemon::fuseConfig() const {
  FuseServer::Config fc;
  fc.revalidateSeconds = options_.revalidateSeconds;
  fc.threads = options_.threads;
  fc.fsname = "epochfs";
  fc.adminSocketPath = socketPath_;
  fc.supervised = supervision_.has_value();
  fc.validateFirstUse = validateFirstUse_;
  return fc;
}

Status Daemon::serveMount(uint32_t id, const HeldMount& m, bool resume) {
  const std::string& mountpoint = m.mountpoint;
  FuseServer::Config fc = fuseConfig();
  fc.allowOther = m.allowOther;
  fc.job = id;
  if (id != 0) {
    // Its own socket: requests through it act on this mount (its orders,
    // its owner), and its root advertises it.
    auto path = AdminServer::defaultPath(mountpoint);
    if (!path.isOk()) return path.status();
    auto server = std::make_unique<AdminServer>();
    server->setMount({id, m.owner});
    adminCommands_->registerMount(*server);
    Status st = server->start(*path);
    if (!st.isOk()) return st;
    fc.adminSocketPath = *path;
    cache::MutexLock lock(socketsMu_);
    mountSockets_[id] = std::move(server);
  }
  if (resume) {
    fc.adoptFd = m.fd;
    fc.initMessage = m.initMessage;
  }
  auto server = std::make_unique<FuseServer>(fc, *namespace_, *cache_, *source_, prefetcher_.get());
  Status s = server->mount(mountpoint);
  if (!s.isOk()) {
    forgetMount(id);
    return s;
  }
  // A new mount's connection goes to the supervisor before it serves: a
  // worker that dies from here on is restarted with it.
  if (!resume && supervision_ && supervision_->sendMount) {
    HeldMount held = m;
    held.fd = server->fuseFd();
    held.initMessage = server->initMessage();
    supervision_->sendMount(held);
  }
  raiseKernelReadAhead(mountpoint);
  Status added = mounts_->add(id, mountpoint, std::move(server));
  if (!added.isOk()) return added;
  // A bad --order of a joined mount was refused before it mounted (join).
  (void)followTorchOrder(id, m.order);
  return added;
}

json Daemon::mountStats(uint32_t id) const {
  json out = nullptr;
  mounts_->forEach([&](uint32_t mid, const std::string& mountpoint, FuseServer& f) {
    if (mid != id) return;
    const FuseServer::Counters& c = f.counters();
    out = {{"job", id},
           {"mountpoint", mountpoint},
           {"read_requests", c.readRequests.load(std::memory_order_relaxed)},
           {"read_bytes", c.readBytes.load(std::memory_order_relaxed)},
           {"stalled_reads", c.stalledReads.load(std::memory_order_relaxed)}};
  });
  if (!out.is_null()) {
    const auto epoch = torchOrders_->epoch(id);
    out["torch_epoch"] = epoch ? json(*epoch) : json(nullptr);
  }
  return out;
}

void Daemon::forgetMount(uint32_t id) {
  std::unique_ptr<AdminServer> gone;
  {
    cache::MutexLock lock(socketsMu_);
    auto it = mountSockets_.find(id);
    if (it == mountSockets_.end()) return;
    gone = std::move(it->second);
    mountSockets_.erase(it);
  }
  gone->stop();
}

Status Daemon::join(const std::string& mountpoint, bool allowOther, std::optional<uid_t> owner,
                    const std::string& order, const AdminCaller& caller) {
  if (!registry_) return Status::unavailable("this daemon keeps its one mount");
  // The daemon mounts in its own mount namespace: the caller must see the same.
  auto nsOf = [](const std::string& pid) {
    char buf[64] = {};
    const ssize_t n = readlink(("/proc/" + pid + "/ns/mnt").c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
  };
  if (nsOf(std::to_string(caller.pid)) != nsOf("self")) {
    return Status::unavailable("the caller is in another mount namespace");
  }
  if (mountpoint.empty() || mountpoint[0] != '/' || mountpoint.size() > 4096) {
    return Status::invalidArgument("the mountpoint must be an absolute path");
  }
  if (!order.empty() && !parseTorchOrder(order).isOk()) {
    return Status::invalidArgument("--order: " + parseTorchOrder(order).status().message());
  }
  cache::MutexLock lock(joinMu_);
  if (mounts_->stopping()) return Status::unavailable("the daemon is stopping");
  if (mounts_->serves(mountpoint)) {
    return Status::invalidArgument(mountpoint + " is already mounted by this daemon");
  }
  HeldMount m;
  m.mountpoint = mountpoint;
  m.owner = owner.value_or(caller.uid);
  m.allowOther = allowOther;
  m.order = order;
  Status s = serveMount(nextMountId_++, m, false);
  if (s.isOk()) {
    mounts_->start();
    spdlog::info("{} joined: {} mount(s) of {}", mountpoint, mounts_->mountpoints().size(),
                 options_.source);
  }
  return s;
}

void Daemon::publishShared() {
  if (!registry_) return;
  auto r = registry_->publish({socketPath_, getpid(), daemonShape(options_)});
  if (!r.isOk()) {
    spdlog::warn("other mounts of this dataset cannot join this daemon: {}", r.status().message());
  } else if (!*r) {
    spdlog::info("another daemon serves this dataset to the mounts that join it");
    registry_.reset();
  }
}

void Daemon::stop(bool restart) { mounts_->stop(restart); }

int Daemon::run() {
  mounts_->start();
  const int rc = mounts_->wait([this](uint32_t id, const std::string& mountpoint) {
    if (supervision_ && supervision_->sendUnmounted) supervision_->sendUnmounted(mountpoint);
    torchOrders_->end(id);
    prefetcher_->clear(id);  // its job's plans end with it
    forgetMount(id);
  });
  if (metricsHttp_) metricsHttp_->stop();
  admin_.stop();
  std::map<uint32_t, std::unique_ptr<AdminServer>> sockets;
  {
    cache::MutexLock lock(socketsMu_);
    sockets.swap(mountSockets_);
  }
  for (auto& [id, server] : sockets) server->stop();
  // A restart's next worker serves the same mounts: it stays registered.
  if (registry_ && rc != kWorkerExitRestart) registry_->withdraw(socketPath_);
  // A stop (a signal read by StopSignals, `epochctl unmount`) or the last
  // unmount ends the sessions with 0.
  return rc;
}

}  // namespace epochfs::fusefs
