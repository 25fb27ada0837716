// A bandwidth-limited source for the benchmark: an ext4 image file under
// /var/tmp, attached to a loop device and mounted on a scratch directory under
// /tmp, whose device reads are capped for the processes put in its
// BlkioThrottle cgroup (the epochfs daemon, or the benchmark's own readers
// for the direct case). Everything is undone by the destructor, and by the
// signal cleanup (mount_guard.h) if the process is interrupted: the cgroup
// emptied and removed, the ext4 unmounted, the loop device detached and the
// image deleted. Requires root, mkfs.ext4, losetup and mount. Used by
// `epochbench prefetch --source-throttle` and, through `epochbench env`
// (bench_env.h), by every benchmark script.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tools/bench/epochbench/blkio_throttle.h"
#include "tools/bench/epochbench/mount_guard.h"

namespace epochfs::bench {

class ThrottledSource {
 public:
  // Builds it: a sparse image of `image_bytes` with room for `inodes` files,
  // reads capped at `read_bps` bytes/s. Throws std::runtime_error (after
  // undoing what was done) on failure.
  static std::unique_ptr<ThrottledSource> create(uint64_t image_bytes, uint64_t inodes,
                                                 uint64_t read_bps);
  ~ThrottledSource();
  ThrottledSource(const ThrottledSource&) = delete;
  ThrottledSource& operator=(const ThrottledSource&) = delete;

  // The mounted ext4 filesystem (empty but for lost+found when created).
  const std::string& root() const { return root_; }
  BlkioThrottle& throttle() { return *throttle_; }
  uint64_t readBps() const { return read_bps_; }
  const std::string& loopDevice() const { return loop_device_; }  // "/dev/loopN"
  const std::string& image() const { return image_; }             // the backing file
  // One line: device, image, limit and cgroup.
  std::string describe() const;

 private:
  explicit ThrottledSource(uint64_t read_bps) : read_bps_(read_bps) {}
  void build(uint64_t image_bytes, uint64_t inodes);
  void teardown();  // idempotent; also run by the signal cleanup

  const uint64_t read_bps_;
  std::unique_ptr<ScratchDir> scratch_;  // holds the mountpoint; removed last
  int cleanup_handle_ = -1;
  std::mutex mu_;  // guards the state below between build() and a signal's teardown()
  std::string image_;
  std::string loop_device_;
  std::string root_;
  bool mounted_ = false;
  std::unique_ptr<BlkioThrottle> throttle_;
};

}  // namespace epochfs::bench
