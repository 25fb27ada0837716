// The timed reader: one pass over a file list the way a PyTorch DataLoader
// worker reads an ImageFolder sample (open, read the whole file, close), with
// several reader threads pulling from one shuffled order.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace epochfs::bench {

struct PassResult {
  int64_t files = 0;   // files read completely
  int64_t errors = 0;  // files whose open or read failed
  uint64_t bytes = 0;
  double seconds = 0;
  std::string first_error;  // "path: strerror", empty if none

  double filesPerSecond() const { return seconds > 0 ? files / seconds : 0; }
  double megabytesPerSecond() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

inline constexpr size_t kReadBufferBytes = 1 << 20;

// Reads every path in `paths` (absolute) once, in an order shuffled with
// `shuffle_seed`, with `threads` reader threads. Only the reading is timed.
PassResult runReadPass(const std::vector<std::string>& paths, int threads, uint64_t shuffle_seed);

// One training epoch: `threads` readers each take the next path of `ordered`
// (absolute, in epoch order), read it whole and then sleep `compute` (the
// model's step on that sample). Timed from `start` (default: when the readers
// start) until the last reader is done.
PassResult runOrderedPass(const std::vector<std::string>& ordered, int threads,
                          std::chrono::microseconds compute = {},
                          std::optional<std::chrono::steady_clock::time_point> start = {});

// The floor of such an epoch: `samples` compute steps (sleeps of `compute`)
// shared by `threads` threads, reading nothing. `files` counts the steps.
PassResult runComputeOnlyPass(size_t samples, int threads, std::chrono::microseconds compute);

// `indices` 0..n-1 shuffled with std::mt19937_64(seed), as runReadPass does.
std::vector<uint32_t> shuffledOrder(size_t n, uint64_t seed);

struct ScanResult {
  int64_t dirs = 0;
  int64_t files = 0;
  int64_t errors = 0;
  double seconds = 0;
};

// What ImageFolder does before the first epoch, os.walk-like: readdir of every
// directory under `root` and a stat of every entry.
ScanResult scanTree(const std::string& root);

}  // namespace epochfs::bench
