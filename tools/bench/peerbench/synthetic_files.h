// The synthetic dataset of the placement benchmarks (placement-bench,
// membership-sim): `count` files of log-normal size around 100 KB with random
// ids from `seed`. Header-only; pure.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "transport/placement_table.h"

namespace epochfs::bench {

inline std::vector<transport::FileBytes> syntheticFiles(int count, uint64_t seed,
                                                        uint64_t* totalBytes) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> size(std::log(100000.0), 0.5);
  std::vector<transport::FileBytes> files;
  files.reserve(static_cast<size_t>(count));
  *totalBytes = 0;
  for (int i = 0; i < count; ++i) {
    files.push_back({rng(), static_cast<uint64_t>(size(rng))});
    *totalBytes += files.back().bytes;
  }
  return files;
}

}  // namespace epochfs::bench
