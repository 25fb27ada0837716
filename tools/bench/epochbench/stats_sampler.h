// Reading an epochfs `stats` reply (docs/METRICS.md), and a sampler that polls
// it while an epoch runs, to show how the prefetcher's lead evolves.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "tools/bench/epochbench/epochfs_mount.h"

namespace epochfs::bench {

// A counter's growth from `before` to `after` (two stats replies), by its
// path (fusefs/admin_counters.h: admin::kStatsSourceReadBytes); 0 if absent.
uint64_t statsDelta(const nlohmann::json& before, const nlohmann::json& after, const char* path);

// Sum of the column `path` (admin::kStatsStreamStalls, ...) over the reply's
// prefetch streams (0 without streams).
uint64_t streamSum(const nlohmann::json& stats, const char* path);

// Polls `mount`'s stats every 250 ms from construction until stop(); each
// sample is {t (s since t0), length, position, lead_files, stalls, hits,
// prefetched_files, inflight_bytes, source_read_bytes}, streams summed.
class StatsSampler {
 public:
  StatsSampler(const EpochfsMount& mount, std::chrono::steady_clock::time_point t0);
  ~StatsSampler() { stop(); }
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;

  void stop();
  // Valid after stop().
  const nlohmann::json& samples() const { return samples_; }
  // Median lead_files over the samples taken while a plan was part-consumed.
  std::optional<double> medianLead() const;

 private:
  void loop(const EpochfsMount& mount, std::chrono::steady_clock::time_point t0);

  std::atomic<bool> stop_{false};
  nlohmann::json samples_ = nlohmann::json::array();
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace epochfs::bench
