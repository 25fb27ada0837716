// Helpers shared by the prefetcher's unit tests: the chunk size they use and
// ChunkCache options with it, a bounded wait for a condition, and whole-file
// plan entries over a LatencySource.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cache/chunk_cache.h"
#include "prefetch/access_plan.h"
#include "tests/unit/cache/fake_source.h"

namespace epochfs::prefetch::testing {

using cache::testing::LatencySource;  // tests/unit/cache/fake_source.h

inline constexpr uint32_t kChunkSize = 4096;

// ChunkCache options of a rig: its dataset id and kChunkSize.
inline cache::ChunkCache::Options cacheOptions(uint64_t datasetId) {
  cache::ChunkCache::Options o;
  o.datasetId = datasetId;
  o.chunkSize = kChunkSize;
  return o;
}

// Polls `pred` every 2 ms; false when it still fails after `timeout`.
inline bool waitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// `n` files of `size` bytes named <prefix><i> in `source`, as whole-file plan entries.
inline std::vector<PlanEntry> addPlanFiles(LatencySource& source, int n, size_t size,
                                           const std::string& prefix = "f") {
  std::vector<PlanEntry> out;
  for (int i = 0; i < n; ++i) {
    PlanEntry e;
    e.relPath = prefix + std::to_string(i);
    e.identity = source.addFile(e.relPath, size);
    e.length = size;
    out.push_back(e);
  }
  return out;
}

}  // namespace epochfs::prefetch::testing
