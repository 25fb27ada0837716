// Mounts that are always undone: MountGuard unmounts in its destructor, and
// installSignalCleanup() makes SIGINT/SIGTERM/SIGHUP unmount every live
// MountGuard and remove every ScratchDir before the process exits.
//
// Nothing here ever deletes recursively: a scratch directory with a mount
// still on it must not be traversed (bindfs would forward the deletes to the
// source).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace epochfs::bench {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in every
// thread created after it) and starts a thread that waits for them, cleans up
// and exits with 128+signal. Call once, early in main, before other threads.
void installSignalCleanup();

// True once a signal has started the cleanup (the process is about to exit).
bool cleanupStarted();

// Registers `undo` (e.g. detach a loop device) to run on a signal, after the
// MountGuards are unmounted and before the ScratchDirs are removed (hooks run
// newest first). Returns a handle for runCleanup. `undo` runs under the
// registry lock: it must not create or destroy MountGuards or ScratchDirs.
int registerCleanup(std::function<void()> undo);

// Unregisters the hook `handle` and runs it now (under the same lock, so a
// signal arriving meanwhile waits for it to finish); no-op if it already ran.
void runCleanup(int handle);

// A directory made with mkdtemp, removed (rmdir, with its empty
// subdirectories) when destroyed.
class ScratchDir {
 public:
  // `prefix` like "/tmp/epochbench-"; throws std::runtime_error on failure.
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Creates an empty subdirectory and returns its path.
  std::string makeSubdir(const std::string& name);

 private:
  std::string path_;
};

// One mounted filesystem; unmounts it when destroyed.
class MountGuard {
 public:
  // Runs `command`, which must mount at `mountpoint` (absolute, canonical) and
  // return once mounted (as daemonizing FUSE filesystems do), then checks that
  // the mount is there. Returns null and sets `error` on failure.
  static std::unique_ptr<MountGuard> mount(const std::vector<std::string>& command,
                                           const std::string& mountpoint, std::string* error);
  ~MountGuard();
  MountGuard(const MountGuard&) = delete;
  MountGuard& operator=(const MountGuard&) = delete;

  const std::string& mountpoint() const { return mountpoint_; }

 private:
  explicit MountGuard(std::string mountpoint) : mountpoint_(std::move(mountpoint)) {}
  std::string mountpoint_;
};

// Unmounts `mountpoint` if mounted: `fusermount3 -u`, then `umount -l`, then
// `fusermount3 -uz`. True if it is no longer mounted.
bool unmountPath(const std::string& mountpoint);

}  // namespace epochfs::bench
