#include "tools/bench/epochbench/throttled_source.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("throttled source: " + what);
}

}  // namespace

std::unique_ptr<ThrottledSource> ThrottledSource::create(uint64_t image_bytes, uint64_t inodes,
                                                         uint64_t read_bps) {
  image_bytes = (image_bytes + (1 << 20) - 1) & ~uint64_t{(1 << 20) - 1};  // whole MiBs for loop
  std::unique_ptr<ThrottledSource> source(new ThrottledSource(read_bps));
  source->scratch_ = std::make_unique<ScratchDir>("/tmp/epochbench-throttle-");
  ThrottledSource* self = source.get();
  source->cleanup_handle_ = registerCleanup([self] { self->teardown(); });
  source->build(image_bytes, inodes);  // on a throw, the destructor undoes the rest
  return source;
}

void ThrottledSource::build(uint64_t image_bytes, uint64_t inodes) {
  require(::geteuid() == 0, "needs root (loop devices, mount, cgroups)");
  for (const char* tool : {"mkfs.ext4", "losetup", "mount", "umount"}) {
    require(!findExecutable(tool).empty(), std::string(tool) + " not found in PATH");
  }
  std::string mountpoint = scratch_->makeSubdir("src");
  {
    std::lock_guard lock(mu_);
    std::string tmpl = "/var/tmp/epochbench-XXXXXX.img";
    int fd = ::mkstemps(tmpl.data(), 4);
    require(fd >= 0, "mkstemps " + tmpl + ": " + std::strerror(errno));
    image_ = tmpl;
    bool sized = ::ftruncate(fd, static_cast<off_t>(image_bytes)) == 0;
    ::close(fd);
    require(sized, "ftruncate " + image_ + ": " + std::strerror(errno));
  }
  std::fprintf(stderr, "throttled source: formatting %s (%.2f GB sparse, %llu inodes)\n",
               image_.c_str(), image_bytes / 1e9, static_cast<unsigned long long>(inodes));
  require(runCommand({"mkfs.ext4", "-q", "-F", "-m", "0", "-N", std::to_string(inodes), "-E",
                      "lazy_itable_init=0,lazy_journal_init=0", image_},
                     600) == 0,
          "mkfs.ext4 " + image_ + " failed");
  {
    // Direct I/O on the backing file keeps its pages out of the host's page
    // cache, so a dropped cache means reads really reach the disk.
    std::lock_guard lock(mu_);
    std::string out;
    if (runCommandOutput({"losetup", "-f", "--show", "--direct-io=on", image_}, &out) != 0) {
      std::fprintf(stderr, "throttled source: losetup --direct-io=on failed, retrying without\n");
      require(runCommandOutput({"losetup", "-f", "--show", image_}, &out) == 0,
              "losetup -f --show " + image_ + " failed");
    }
    loop_device_ = trim(out);
    require(loop_device_.rfind("/dev/loop", 0) == 0, "losetup printed '" + loop_device_ + "'");
  }
  {
    std::lock_guard lock(mu_);
    require(
        runCommand({"mount", "-t", "ext4", "-o", "noatime", loop_device_, mountpoint}, 60) == 0 &&
            waitForMount(mountpoint, 10),
        "mount " + loop_device_ + " " + mountpoint + " failed");
    root_ = mountpoint;
    mounted_ = true;
  }
  struct stat st;
  require(::stat(loop_device_.c_str(), &st) == 0 && S_ISBLK(st.st_mode),
          loop_device_ + " is not a block device");
  std::string error;
  auto throttle = BlkioThrottle::create(st.st_rdev, read_bps_, &error);
  require(throttle != nullptr, error);
  std::lock_guard lock(mu_);
  throttle_ = std::move(throttle);
  std::fprintf(stderr, "throttled source: %s\n", describe().c_str());
}

std::string ThrottledSource::describe() const {
  char limit[64];
  std::snprintf(limit, sizeof(limit), "%.1f MiB/s (%llu B/s)", read_bps_ / 1048576.0,
                static_cast<unsigned long long>(read_bps_));
  return "ext4 on " + loop_device_ + " (" + (throttle_ ? throttle_->deviceId() : "?") + ", image " +
         image_ + ") mounted at " + root_ + ", reads capped at " + limit + " by " +
         (throttle_ ? throttle_->mechanism() + " " + throttle_->path() : "?");
}

ThrottledSource::~ThrottledSource() {
  if (cleanup_handle_ >= 0) runCleanup(cleanup_handle_);
  scratch_.reset();  // after the unmount: rmdir of the empty mountpoint
}

void ThrottledSource::teardown() {
  std::lock_guard lock(mu_);
  if (throttle_) throttle_->destroy();  // moves remaining members (exiting daemons, us) out
  if (mounted_) {
    // The epochfs daemons hold the source open until they have exited, a
    // moment after their FUSE unmount: retry while the mount is busy.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (isMounted(root_) && runCommand({"umount", root_}, 30, /*quiet=*/true) != 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (isMounted(root_)) {
      std::fprintf(stderr, "epochbench: %s still busy; lazy unmount\n", root_.c_str());
      runCommand({"umount", "-l", root_}, 30, /*quiet=*/true);
    }
    mounted_ = false;
  }
  if (!loop_device_.empty()) {
    if (runCommand({"losetup", "-d", loop_device_}, 30, /*quiet=*/true) != 0) {
      std::fprintf(stderr, "epochbench: could not detach %s; run: losetup -d %s\n",
                   loop_device_.c_str(), loop_device_.c_str());
    }
    loop_device_.clear();
  }
  if (!image_.empty()) {
    ::unlink(image_.c_str());
    image_.clear();
  }
  throttle_.reset();
}

}  // namespace epochfs::bench
