// DiskProbe: the health check of an unhealthy disk tier. Writes a small file
// `PROBE` (0600) in the tier's own directory, reads it back, compares, and
// removes it. The tier's fault hook applies to its I/O like to segment I/O, so
// an injected fault fails the probe as a real one would.
#pragma once

#include <chrono>
#include <cstddef>

#include "cache/status.h"

namespace epochfs::cache {

class DiskFaults;

class DiskProbe {
 public:
  static constexpr const char* kFileName = "PROBE";
  static constexpr size_t kBytes = 64 << 10;

  // Ok if the write, the read-back and the comparison all succeed within
  // `deadline` (a disk that answers slowly is not healthy). `faults` may be null.
  static Status run(int dirFd, DiskFaults* faults, std::chrono::milliseconds deadline);
};

}  // namespace epochfs::cache
