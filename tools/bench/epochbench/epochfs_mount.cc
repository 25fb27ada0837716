#include "tools/bench/epochbench/epochfs_mount.h"

#include <cstdio>
#include <filesystem>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/client.h"
#include "tools/admin_client/order_writer.h"
#include "tools/admin_client/path_field.h"
#include "tools/bench/epochbench/daemon_probe.h"
#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {

std::unique_ptr<EpochfsMount> EpochfsMount::start(const std::string& epochfs,
                                                  const std::string& source, ScratchDir& scratch,
                                                  const std::vector<std::string>& args,
                                                  BlkioThrottle* throttle, std::string* error) {
  static int serial = 0;  // a new mountpoint each time: a new admin socket path too
  std::unique_ptr<EpochfsMount> m(new EpochfsMount());
  m->mountpoint_ = scratch.makeSubdir("mnt-" + std::to_string(++serial));
  std::vector<std::string> command = {epochfs, source, m->mountpoint_};
  command.insert(command.end(), args.begin(), args.end());
  m->guard_ = MountGuard::mount(command, m->mountpoint_, error);
  if (!m->guard_) return nullptr;
  auto pid = findEpochfsPid(m->mountpoint_);
  if (!pid) {
    *error = "epochfs daemon pid not found for " + m->mountpoint_;
    return nullptr;
  }
  m->pid_ = *pid;
  if (throttle != nullptr && !throttle->addProcess(m->pid_, error)) return nullptr;
  return m;
}

EpochfsMount::~EpochfsMount() {
  guard_.reset();  // fusermount3 -u: the daemon exits on its own
  if (pid_ > 0 && !waitForExit(pid_, 15)) {
    std::fprintf(stderr, "epochbench: epochfs pid %d still running 15 s after its unmount\n",
                 static_cast<int>(pid_));
  }
  std::error_code ec;
  if (!mountpoint_.empty() && !isMounted(mountpoint_)) {
    std::filesystem::remove(mountpoint_, ec);  // rmdir only
  }
}

std::optional<nlohmann::json> EpochfsMount::stats(std::string* error) const {
  return adminRequest(mountpoint_, {{"cmd", admin::kCmdStats}}, error);
}

std::optional<uint64_t> EpochfsMount::registerOrder(int64_t epoch,
                                                    const std::vector<std::string>& entries,
                                                    std::string* error) const {
  constexpr double kTimeoutSeconds = 30;  // each message, the commit too
  auto fail = [error](const admin::Error& e) -> std::optional<uint64_t> {
    *error = e.message;
    return std::nullopt;
  };
  auto client = admin::Client::connect(mountpoint_);
  if (!client) return fail(client.error());
  admin::OrderWriter order(*client, kTimeoutSeconds);
  if (auto begun = order.begin(epoch, /*rank=*/0, /*start=*/0); !begun) return fail(begun.error());
  for (const auto& path : entries) {
    if (auto added = order.append(admin::encodePath(path)); !added) return fail(added.error());
  }
  auto reply = order.commit(kTimeoutSeconds);
  if (!reply) return fail(reply.error());
  return reply->value("entries", uint64_t{0});
}

}  // namespace epochfs::bench
