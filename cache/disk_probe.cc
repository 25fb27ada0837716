#include "cache/disk_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "cache/disk_faults.h"

namespace epochfs::cache {

namespace {

Status writeAll(int fd, const std::vector<char>& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::fromErrno(errno, "write probe file");
    if (n == 0) return Status::noSpace("write probe file: no progress");
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status readAll(int fd, std::vector<char>& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pread(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::fromErrno(errno, "read probe file");
    if (n == 0) return Status::ioError("read probe file: short read");
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status writeReadVerify(int fd, DiskFaults* faults) {
  std::vector<char> pattern(DiskProbe::kBytes);
  std::mt19937_64 rng(std::random_device{}());
  for (size_t i = 0; i < pattern.size(); i += 8) {
    uint64_t v = rng();
    for (size_t b = 0; b < 8 && i + b < pattern.size(); ++b)
      pattern[i + b] = static_cast<char>(v >> (8 * b));
  }
  Status s = faults != nullptr ? faults->beforeWrite("write probe file") : Status::ok();
  if (s.isOk()) s = writeAll(fd, pattern);
  if (s.isOk() && ::fdatasync(fd) != 0) s = Status::fromErrno(errno, "sync probe file");
  if (!s.isOk()) return s;
  std::vector<char> back(pattern.size());
  s = faults != nullptr ? faults->beforeRead("read probe file") : Status::ok();
  if (s.isOk()) s = readAll(fd, back);
  if (!s.isOk()) return s;
  if (back != pattern) return Status::corruption("probe file read back different bytes");
  return Status::ok();
}

}  // namespace

Status DiskProbe::run(int dirFd, DiskFaults* faults, std::chrono::milliseconds deadline) {
  const auto start = std::chrono::steady_clock::now();
  int fd = ::openat(dirFd, kFileName, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::fromErrno(errno, std::string("create probe file ") + kFileName);
  Status s = writeReadVerify(fd, faults);
  ::close(fd);
  ::unlinkat(dirFd, kFileName, 0);
  if (!s.isOk()) return s;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (took > deadline) {
    return Status::timedOut("probe took " + std::to_string(took.count()) + " ms (deadline " +
                            std::to_string(deadline.count()) + " ms)");
  }
  return Status::ok();
}

}  // namespace epochfs::cache
