#include "cache/owned_dir.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace epochfs::cache {

namespace {

constexpr const char* kLockName = "LOCK";

// The pid another holder wrote into the lock file, or "unknown".
std::string lockHolder(int lockFd) {
  char buf[32] = {};
  ssize_t n = ::pread(lockFd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "unknown";
  long pid = std::strtol(buf, nullptr, 10);
  return pid > 0 ? std::to_string(pid) : "unknown";
}

}  // namespace

// Opens (creating 0700 if missing) the directory and checks that it is ours.
Result<int> OwnedDir::open(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::fromErrno(errno, "create cache directory " + dir);
  }
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return Status::invalidArgument("cache directory " + dir + " is not a directory");
    }
    return Status::fromErrno(errno, "open cache directory " + dir);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = Status::fromErrno(errno, "stat cache directory " + dir);
    ::close(fd);
    return s;
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status::permissionDenied("cache directory " + dir + " is owned by uid " +
                                    std::to_string(st.st_uid) + ", not by this process (uid " +
                                    std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    spdlog::warn("cache directory {} is accessible to other users (mode {:o})", dir,
                 st.st_mode & 0777);
  }
  return fd;
}

// Takes the directory's LOCK (flock, released by the kernel if we die).
Result<int> OwnedDir::lock(int dirFd, const std::string& dir) {
  int fd = ::openat(dirFd, kLockName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::fromErrno(errno, "open " + dir + "/" + kLockName);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    Status s = err == EWOULDBLOCK ? Status::unavailable("cache directory " + dir +
                                                        " is in use by another epochfs (pid " +
                                                        lockHolder(fd) + ")")
                                  : Status::fromErrno(err, "lock " + dir + "/" + kLockName);
    ::close(fd);
    return s;
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    spdlog::warn("cannot write pid into {}/{}", dir, kLockName);  // the lock still holds
  }
  return fd;
}

}  // namespace epochfs::cache
