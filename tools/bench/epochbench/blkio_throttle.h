// A cgroup that caps the read bandwidth of its member processes on one block
// device, with the kernel's block-I/O controller: cgroup v1
// `blkio.throttle.read_bps_device` ("MAJ:MIN BPS") when the v1 blkio
// hierarchy is mounted at /sys/fs/cgroup/blkio, else cgroup v2 `io.max`
// ("MAJ:MIN rbps=BPS") under a cgroup2 /sys/fs/cgroup with the io controller.
// Requires root. Not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace epochfs::bench {

class BlkioThrottle {
 public:
  // Creates the cgroup and sets the limit. Null with `error` set if neither
  // hierarchy is usable or the kernel refuses.
  static std::unique_ptr<BlkioThrottle> create(dev_t device, uint64_t read_bps, std::string* error);
  ~BlkioThrottle() { destroy(); }
  BlkioThrottle(const BlkioThrottle&) = delete;
  BlkioThrottle& operator=(const BlkioThrottle&) = delete;

  // Moves process `pid` (all its threads; threads it creates later follow)
  // into the cgroup, or back to the cgroup this process was in at create().
  bool addProcess(pid_t pid, std::string* error);
  bool removeProcess(pid_t pid, std::string* error);

  // Bytes the members read from the device, as the controller counts them.
  std::optional<uint64_t> readBytes() const;

  // Moves every remaining member out, then removes the cgroup. Idempotent;
  // retries for a few seconds while members are exiting.
  void destroy();

  const std::string& path() const { return path_; }
  // "cgroup v1 blkio" or "cgroup v2 io".
  std::string mechanism() const { return v2_ ? "cgroup v2 io" : "cgroup v1 blkio"; }
  std::string deviceId() const;  // "MAJ:MIN"

 private:
  BlkioThrottle(bool v2, std::string path, std::string home, dev_t device)
      : v2_(v2), path_(std::move(path)), home_(std::move(home)), device_(device) {}

  bool v2_;
  std::string path_;  // the cgroup directory; empty once destroyed
  std::string home_;  // the directory of the cgroup members return to
  dev_t device_;
};

}  // namespace epochfs::bench
