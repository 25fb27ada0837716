// `epochbench run`: mounts the cases, interleaves their timed passes and
// reports. Cases:
//   native       the source directory, kernel page cache warm;
//   bindfs       `bindfs SRC MNT` (default options), its page cache warm;
//   epochfs-ram  `epochfs SRC MNT --ram-cache SIZE`, kernel page cache dropped
//                before each pass so every read reaches the daemon's RAM tier;
//   epochfs-hot  the same mount with the kernel page cache warm.
// Each round runs one timed pass per case, in the order given; untimed
// warm-up passes restore the warm state a drop took away.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/epochbench/dataset_generator.h"

namespace epochfs::bench {

inline const std::vector<std::string> kAllCases = {"native", "bindfs", "epochfs-ram",
                                                   "epochfs-hot"};

struct RunOptions {
  std::string dir = "/tmp/epochbench-data";
  DatasetSpec spec;
  int threads = 2;
  int repeats = 5;
  std::vector<std::string> cases = kAllCases;
  bool json = false;    // JSON document on stdout; the table goes to stderr
  bool strict = false;  // exit 1 if a done-when check fails
  std::string epochfs;  // empty: dirname(/proc/self/exe)/epochfs
  std::string ram_cache = "4G";
};

// Runs the benchmark; returns the process exit code. Throws
// std::runtime_error on setup failures (dataset, scratch directory).
int runBenchmark(const RunOptions& options);

}  // namespace epochfs::bench
