#include "tools/bench/epochbench/stats_sampler.h"

#include <vector>

#include "tools/admin_client/reply_value.h"
#include "tools/bench/epochbench/report.h"

namespace epochfs::bench {

using nlohmann::json;

namespace {

// A sample's keys (the report's, not the daemon's) that medianLead() reads back.
constexpr const char* kLength = "length";
constexpr const char* kPosition = "position";
constexpr const char* kLeadFiles = "lead_files";

}  // namespace

uint64_t statsDelta(const json& before, const json& after, const char* path) {
  return admin::replyCount(after, path) - admin::replyCount(before, path);
}

uint64_t streamSum(const json& stats, const char* path) {
  const json* rows = admin::replyValue(stats, admin::kStatsStreams);
  if (rows == nullptr || !rows->is_array()) return 0;
  uint64_t sum = 0;
  for (const auto& s : *rows) sum += admin::rowValueOr(s, path, uint64_t{0});
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
    if (s[kPosition] > 0 && s[kPosition] < s[kLength]) leads.push_back(s[kLeadFiles]);
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
           {kLength, streamSum(*st, admin::kStatsStreamLength)},
           {kPosition, streamSum(*st, admin::kStatsStreamPosition)},
           {kLeadFiles, streamSum(*st, admin::kStatsStreamLeadFiles)},
           {"stalls", streamSum(*st, admin::kStatsStreamStalls)},
           {"hits", streamSum(*st, admin::kStatsStreamHits)},
           {"prefetched_files", streamSum(*st, admin::kStatsStreamPrefetchedFiles)},
           {"inflight_bytes", admin::replyCount(*st, admin::kStatsPrefetchInflightBytes)},
           {"source_read_bytes", admin::replyCount(*st, admin::kStatsSourceReadBytes)}});
    }
    for (int i = 0; i < 25 && !stop_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace epochfs::bench
