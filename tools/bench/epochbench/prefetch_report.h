// Results of `epochbench prefetch` and their presentation: one aligned table
// for the epoch cases (direct, cold, plan), one for the eviction case, the
// informational targets and the JSON document.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/epochbench/read_pass.h"

namespace epochfs::bench {

// One timed epoch of one case.
struct EpochRun {
  int repeat = 0;
  PassResult pass;
  double register_s = 0;                 // plan: time spent registering the order
  uint64_t stalls = 0, hits = 0;         // plan: prefetch.streams[] sums
  uint64_t prefetched_files = 0;         // plan
  std::optional<uint64_t> pushed_files;  // epochfs: prefetch.pushed_files (page-cache push)
  std::optional<uint64_t> daemon_reads;  // epochfs: read requests the daemon served
  std::optional<double> lead_files;      // plan: median lead over the epoch's samples
  std::optional<uint64_t> source_bytes;  // daemon tiers.source.read_bytes (epochfs cases)
  std::optional<uint64_t> device_bytes;  // cgroup read bytes (with --source-throttle)
  std::optional<double> daemon_cpu_s;    // epochfs cases
  std::optional<double> cpu_busy;        // share of all CPUs busy during the pass
  nlohmann::json samples = nlohmann::json::array();  // stats sampled during the epoch

  std::optional<double> stallFraction() const {
    if (stalls + hits == 0) return std::nullopt;
    return static_cast<double>(stalls) / static_cast<double>(stalls + hits);
  }
};

// The pseudo-case that only runs the compute steps (sleeps), no reads.
inline constexpr const char* kSleepOnly = "sleep-only";

struct EpochCase {
  std::string name;  // direct, cold, plan, warm, or kSleepOnly
  std::vector<EpochRun> runs;
};

// One epoch of the eviction case: what it read from the source, as fractions
// of the dataset's bytes.
struct EvictionEpoch {
  int repeat = 0;
  int epoch = 0;  // 1-based
  PassResult pass;
  double rchar_fraction = 0;              // daemon's /proc/PID/io rchar delta
  double daemon_fraction = 0;             // daemon's tiers.source.read_bytes delta
  std::optional<double> device_fraction;  // throttle cgroup's read bytes delta
  uint64_t rchar_bytes = 0, daemon_bytes = 0;
};

struct EvictionMode {
  std::string name;  // "lru" or "order-aware"
  std::vector<EvictionEpoch> epochs;
};

inline constexpr int kEvictionEpochs = 3;
// Order-aware (Belady) target for epochs 2..3 with a cache of half the
// dataset: at least 95% of the ideal 50% hit rate.
inline constexpr double kOrderAwareTarget = 1 - 0.95 * 0.5;
// LRU under a fresh random permutation with cache fraction a = 0.5 hits
// a + (1 - a) ln(1 - a) = 0.153 of the bytes, so reads 0.847 from the source.
inline constexpr double kLruExpected = 0.847;

struct PrefetchResults {
  nlohmann::json config;
  bool throttled = false;
  double compute_ms = 0;
  double compute_only_s = 0;  // files x compute-ms / threads
  std::vector<EpochCase> cases;
  bool eviction_run = false;
  uint64_t eviction_dataset_bytes = 0;
  uint64_t eviction_ram_bytes = 0;
  std::vector<EvictionMode> eviction;
};

// An informational target: PASS, FAIL, or n/a when this configuration does
// not measure it (the value is still shown).
struct Target {
  std::string name;
  std::string measured;
  std::string verdict;
};

std::vector<Target> prefetchTargets(const PrefetchResults& results);
// One progress line per measured epoch.
void printEpochProgress(std::FILE* out, const std::string& name, const EpochRun& run, int repeats);
void printEvictionProgress(std::FILE* out, const std::string& mode, const EvictionEpoch& e);
void printPrefetchReport(std::FILE* out, const PrefetchResults& results,
                         const std::vector<Target>& targets);
nlohmann::json prefetchJson(const PrefetchResults& results, const std::vector<Target>& targets);

}  // namespace epochfs::bench
