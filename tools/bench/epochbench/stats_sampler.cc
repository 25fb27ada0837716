#include "tools/bench/epochbench/stats_sampler.h"

#include <vector>

#include "tools/bench/epochbench/report.h"

namespace epochfs::bench {

using nlohmann::json;

uint64_t statsCounter(const json& stats, std::initializer_list<const char*> path) {
  const json* j = &stats;
  for (const char* key : path) {
    if (!j->is_object() || !j->contains(key)) return 0;
    j = &(*j)[key];
  }
  return j->is_number_unsigned() ? j->get<uint64_t>() : 0;
}

uint64_t streamSum(const json& stats, const char* field) {
  if (!stats.contains("prefetch") || !stats["prefetch"].contains("streams")) return 0;
  uint64_t sum = 0;
  for (const auto& s : stats["prefetch"]["streams"]) {
    if (s.contains(field) && s[field].is_number_unsigned()) sum += s[field].get<uint64_t>();
  }
  return sum;
}

StatsSampler::StatsSampler(const EpochfsMount& mount, std::chrono::steady_clock::time_point t0)
    : thread_([this, &mount, t0] { loop(mount, t0); }) {}

void StatsSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::optional<double> StatsSampler::medianLead() const {
  std::vector<double> leads;
  for (const auto& s : samples_) {
    if (s["position"] > 0 && s["position"] < s["length"]) leads.push_back(s["lead_files"]);
  }
  if (leads.empty()) return std::nullopt;
  return summarize(leads).median;
}

void StatsSampler::loop(const EpochfsMount& mount, std::chrono::steady_clock::time_point t0) {
  using std::chrono::steady_clock;
  while (!stop_) {
    std::string error;
    if (auto st = mount.stats(&error)) {
      samples_.push_back(
          {{"t", std::chrono::duration<double>(steady_clock::now() - t0).count()},
           {"length", streamSum(*st, "length")},
           {"position", streamSum(*st, "position")},
           {"lead_files", streamSum(*st, "lead_files")},
           {"stalls", streamSum(*st, "stalls")},
           {"hits", streamSum(*st, "hits")},
           {"prefetched_files", streamSum(*st, "prefetched_files")},
           {"inflight_bytes", statsCounter(*st, {"prefetch", "inflight_bytes"})},
           {"source_read_bytes", statsCounter(*st, {"tiers", "source", "read_bytes"})}});
    }
    for (int i = 0; i < 25 && !stop_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace epochfs::bench
