// One epochfs daemon started for one measurement: mounted on a fresh
// subdirectory of a scratch directory, its pid known (and, with a throttle,
// moved into the throttled cgroup), its admin stats at hand. Destruction
// unmounts it and waits for the daemon to exit, so the next mount starts from
// nothing and the source can be unmounted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/epochbench/blkio_throttle.h"
#include "tools/bench/epochbench/mount_guard.h"

namespace epochfs::bench {

class EpochfsMount {
 public:
  // Runs `epochfs SOURCE MNT ARGS...`. With `throttle`, the daemon joins its
  // cgroup before this returns. Null with `error` set on failure.
  static std::unique_ptr<EpochfsMount> start(const std::string& epochfs, const std::string& source,
                                             ScratchDir& scratch,
                                             const std::vector<std::string>& args,
                                             BlkioThrottle* throttle, std::string* error);
  ~EpochfsMount();
  EpochfsMount(const EpochfsMount&) = delete;
  EpochfsMount& operator=(const EpochfsMount&) = delete;

  const std::string& mountpoint() const { return mountpoint_; }
  pid_t pid() const { return pid_; }

  // The admin `stats` reply; nullopt with `error` set on failure.
  std::optional<nlohmann::json> stats(std::string* error) const;

  // Registers `entries` (paths relative to the mount, in access order) as the
  // order of `epoch` for rank 0, starting at entry 0, over one admin
  // connection. The entry count the daemon committed; nullopt with `error` set.
  std::optional<uint64_t> registerOrder(int64_t epoch, const std::vector<std::string>& entries,
                                        std::string* error) const;

 private:
  EpochfsMount() = default;
  std::unique_ptr<MountGuard> guard_;
  std::string mountpoint_;
  pid_t pid_ = -1;
};

}  // namespace epochfs::bench
