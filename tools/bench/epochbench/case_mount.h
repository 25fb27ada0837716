// One filesystem a benchmark case reads through, mounted over a source
// directory for one measurement: "native" (the source itself, nothing
// mounted), "bindfs" (-o ro), "rclone" (mount --vfs-cache-mode full, with a
// fresh cache directory removed after it) or "epochfs". The serving processes
// are known (an epochfs worker and its supervisor), so a caller can count
// their CPU or put them in a BlkioThrottle. Destruction unmounts and waits for
// the daemon to exit, so the source can be unmounted next. Used by
// `epochbench peers` and `epochbench env` (its `mount` command).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tools/bench/epochbench/epochfs_mount.h"
#include "tools/bench/epochbench/mount_guard.h"

namespace epochfs::bench {

class CaseMount {
 public:
  // Mounts `name` over `source` on a new subdirectory of `scratch`. `epochfs`
  // is the binary (empty: epochfs next to this executable); `epochfs_args`
  // follow `epochfs SOURCE MNT`. Null with `error` set on failure.
  static std::unique_ptr<CaseMount> open(const std::string& name, const std::string& source,
                                         const std::string& epochfs,
                                         const std::vector<std::string>& epochfs_args,
                                         ScratchDir& scratch, std::string* error);
  CaseMount(std::string name, std::string root) : name_(std::move(name)), root_(std::move(root)) {}
  ~CaseMount();
  CaseMount(const CaseMount&) = delete;
  CaseMount& operator=(const CaseMount&) = delete;

  const std::string& name() const { return name_; }
  // Where the case reads: the mountpoint, or the source for native.
  const std::string& root() const { return root_; }
  // The serving processes, the one that reads the source first; none for native.
  const std::vector<pid_t>& daemonPids() const { return daemon_pids_; }
  // utime + stime of the serving process(es); 0 for native.
  double daemonCpuSeconds() const;

 private:
  std::string name_;
  std::string root_;
  std::vector<pid_t> daemon_pids_;
  std::unique_ptr<MountGuard> guard_;
  std::unique_ptr<EpochfsMount> epochfs_;
  int cleanup_ = -1;
};

}  // namespace epochfs::bench
