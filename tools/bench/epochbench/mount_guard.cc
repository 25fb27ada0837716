#include "tools/bench/epochbench/mount_guard.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> cleanup_started{false};

// Everything to undo on a signal. Guarded by registryMutex().
struct Registry {
  std::set<std::string> mounts;
  std::map<int, std::function<void()>> hooks;  // by handle; run newest first
  int next_hook = 0;
  std::set<std::string> scratch_dirs;
};

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
Registry& registry() {
  static Registry r;
  return r;
}

// rmdir of `dir`'s empty, unmounted subdirectories, then of `dir`.
void removeScratchDir(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!isMounted(entry.path().string())) fs::remove(entry.path(), ec);  // rmdir only
  }
  if (!fs::remove(dir, ec)) {
    std::fprintf(stderr, "epochbench: could not remove %s: %s\n", dir.c_str(),
                 ec ? ec.message().c_str() : "not empty");
  }
}

void cleanupEverything() {
  std::lock_guard lock(registryMutex());
  for (const auto& m : registry().mounts) unmountPath(m);
  registry().mounts.clear();
  for (auto it = registry().hooks.rbegin(); it != registry().hooks.rend(); ++it) it->second();
  registry().hooks.clear();
  for (const auto& d : registry().scratch_dirs) removeScratchDir(d);
  registry().scratch_dirs.clear();
}

sigset_t cleanupSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void installSignalCleanup() {
  sigset_t set = cleanupSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    cleanup_started = true;
    std::fprintf(stderr, "\nepochbench: caught signal %d, unmounting and exiting\n", sig);
    cleanupEverything();
    _exit(128 + sig);
  }).detach();
}

bool cleanupStarted() { return cleanup_started; }

int registerCleanup(std::function<void()> undo) {
  std::lock_guard lock(registryMutex());
  int handle = registry().next_hook++;
  registry().hooks.emplace(handle, std::move(undo));
  return handle;
}

void runCleanup(int handle) {
  std::lock_guard lock(registryMutex());
  auto it = registry().hooks.find(handle);
  if (it == registry().hooks.end()) return;
  std::function<void()> undo = std::move(it->second);
  registry().hooks.erase(it);
  undo();
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + tmpl + " failed");
  }
  path_ = fs::canonical(tmpl).string();  // mountinfo holds canonical paths
  std::lock_guard lock(registryMutex());
  registry().scratch_dirs.insert(path_);
}

ScratchDir::~ScratchDir() {
  std::lock_guard lock(registryMutex());
  if (registry().scratch_dirs.erase(path_) > 0) removeScratchDir(path_);
}

std::string ScratchDir::makeSubdir(const std::string& name) {
  std::string sub = path_ + "/" + name;
  fs::create_directory(sub);
  return sub;
}

std::unique_ptr<MountGuard> MountGuard::mount(const std::vector<std::string>& command,
                                              const std::string& mountpoint, std::string* error) {
  {
    // Registered before the command runs, so a signal during mounting still unmounts.
    std::lock_guard lock(registryMutex());
    registry().mounts.insert(mountpoint);
  }
  std::unique_ptr<MountGuard> guard(new MountGuard(mountpoint));
  int rc = runCommand(command, /*timeout_s=*/120);
  if (rc != 0) {
    *error = command[0] + " exited with status " + std::to_string(rc);
    return nullptr;  // the guard unmounts anything half-made
  }
  if (!waitForMount(mountpoint, /*timeout_s=*/10)) {
    *error = command[0] + " returned but " + mountpoint + " is not mounted";
    return nullptr;
  }
  return guard;
}

MountGuard::~MountGuard() {
  std::lock_guard lock(registryMutex());
  if (registry().mounts.erase(mountpoint_) > 0 && !unmountPath(mountpoint_)) {
    std::fprintf(stderr, "epochbench: could not unmount %s; run: fusermount3 -u %s\n",
                 mountpoint_.c_str(), mountpoint_.c_str());
  }
}

bool unmountPath(const std::string& mountpoint) {
  for (int attempt = 0; attempt < 3 && isMounted(mountpoint); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    runCommand({"fusermount3", "-u", mountpoint}, 30, /*quiet=*/true);
  }
  if (isMounted(mountpoint)) runCommand({"umount", "-l", mountpoint}, 30, /*quiet=*/true);
  if (isMounted(mountpoint)) runCommand({"fusermount3", "-uz", mountpoint}, 30, /*quiet=*/true);
  return !isMounted(mountpoint);
}

}  // namespace epochfs::bench
