#include "tools/epochctl/stats_watch.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/reply_value.h"
#include "tools/epochctl/ctl_client.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/progress_bar.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {

using admin::replyCount;
using admin::rowValueOr;

// The reply's prefetch streams (an empty array when it has none).
const json& streamsOf(const json& stats) {
  static const json kNone = json::array();
  const json* rows = admin::replyValue(stats, admin::kStatsStreams);
  return rows != nullptr && rows->is_array() ? *rows : kNone;
}

std::string pct(double v) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * v);
  return b;
}

std::string micros(uint64_t us) {
  char b[32];
  if (us >= 1000) {
    std::snprintf(b, sizeof b, "%.1f ms", static_cast<double>(us) / 1000.0);
  } else {
    std::snprintf(b, sizeof b, "%llu us", static_cast<unsigned long long>(us));
  }
  return b;
}

}  // namespace

StatsWatch::StatsWatch(std::string mountpoint, std::string socket, double seconds, long count,
                       bool json)
    : mountpoint_(std::move(mountpoint)),
      socket_(std::move(socket)),
      seconds_(seconds),
      count_(count),
      json_(json) {}

json StatsWatch::rates(const json& prev, const json& cur) {
  const double dt = admin::replyValueOr(cur, admin::kStatsUptime, 0.0) -
                    admin::replyValueOr(prev, admin::kStatsUptime, 0.0);
  auto rate = [&](const char* path) {
    const uint64_t a = replyCount(prev, path), b = replyCount(cur, path);
    return dt > 0 && b >= a ? static_cast<double>(b - a) / dt : 0.0;
  };
  const double ram = rate(admin::kStatsRamHitBytes);
  const double disk = rate(admin::kStatsDiskHitBytes);
  const double peer = rate(admin::kStatsPeerHitBytes);
  const double source = rate(admin::kStatsSourceBytes);
  const double served = ram + disk + peer + source;
  json r = {{"seconds", dt},
            {"read_requests_per_s", rate(admin::kStatsReadRequests)},
            {"read_bytes_per_s", rate(admin::kStatsReadBytes)},
            {"ram_bytes_per_s", ram},
            {"disk_bytes_per_s", disk},
            {"peer_bytes_per_s", peer},
            {"source_bytes_per_s", source},
            {"source_read_bytes_per_s", rate(admin::kStatsSourceReadBytes)},
            {"hit_ratio", served > 0 ? json((ram + disk + peer) / served) : json(nullptr)},
            {"ram_evictions_per_s", rate(admin::kStatsRamEvictions)},
            {"disk_evictions_per_s", rate(admin::kStatsDiskEvictions)}};
  json streams = json::array();
  for (const json& row : streamsOf(cur)) {
    const int rank = rowValueOr(row, admin::kStatsStreamRank, -2);
    const uint64_t now = rowValueOr(row, admin::kStatsStreamStalls, uint64_t{0});
    double stalls = 0;
    for (const json& q : streamsOf(prev)) {
      if (rowValueOr(q, admin::kStatsStreamRank, -1) == rank && dt > 0) {
        const uint64_t before = rowValueOr(q, admin::kStatsStreamStalls, uint64_t{0});
        stalls = static_cast<double>(now - std::min(now, before)) / dt;
      }
    }
    streams.push_back(
        {{"rank", rowValueOr(row, admin::kStatsStreamRank, 0)}, {"stalls_per_s", stalls}});
  }
  r["streams"] = streams;
  return r;
}

std::string StatsWatch::render(const std::string& mountpoint, double every, const json& s,
                               const json& r) {
  // A tier's fill: its used and capacity paths, and its rate's key in `r`.
  struct Fill {
    const char* name;
    const char* usedBytes;
    const char* capacityBytes;
    const char* evictionsPerSecond;
  };
  static constexpr Fill kFills[] = {
      {"ram", admin::kStatsRamUsedBytes, admin::kStatsRamCapacityBytes, "ram_evictions_per_s"},
      {"disk", admin::kStatsDiskUsedBytes, admin::kStatsDiskCapacityBytes, "disk_evictions_per_s"}};
  std::ostringstream o;
  char buf[320];
  o << "epochfs " << mountpoint << "  every " << every << " s  up "
    << ProgressBar::clock(admin::replyValueOr(s, admin::kStatsUptime, 0.0)) << "  (Ctrl-C stops)\n";
  std::snprintf(buf, sizeof buf,
                "reads    %8.0f req/s %11s/s   (page-cache hits never reach the daemon)\n",
                r.value("read_requests_per_s", 0.0),
                humanBytes(static_cast<uint64_t>(r.value("read_bytes_per_s", 0.0))).c_str());
  o << buf;
  const double total = r.value("ram_bytes_per_s", 0.0) + r.value("disk_bytes_per_s", 0.0) +
                       r.value("peer_bytes_per_s", 0.0) + r.value("source_bytes_per_s", 0.0);
  auto share = [&](const char* k) { return pct(total > 0 ? r.value(k, 0.0) / total : 0.0); };
  o << "from     ram " << share("ram_bytes_per_s") << "  disk " << share("disk_bytes_per_s")
    << "  peer " << share("peer_bytes_per_s") << "  source " << share("source_bytes_per_s") << "\n";
  const uint64_t readBytes = replyCount(s, admin::kStatsReadBytes);
  const uint64_t fromSource = replyCount(s, admin::kStatsSourceBytes);
  o << "hit      " << (r["hit_ratio"].is_number() ? pct(r["hit_ratio"].get<double>()) : "-")
    << " this interval, "
    << pct(readBytes ? 1.0 - static_cast<double>(std::min(readBytes, fromSource)) /
                                 static_cast<double>(readBytes)
                     : 0.0)
    << " since mount\n";
  o << "source   " << humanBytes(static_cast<uint64_t>(r.value("source_read_bytes_per_s", 0.0)))
    << "/s read, p50 " << micros(replyCount(s, admin::kStatsSourceLatencyP50)) << ", p99 "
    << micros(replyCount(s, admin::kStatsSourceLatencyP99)) << ", errors "
    << replyCount(s, admin::kStatsSourceErrors) << "\n";
  o << "tiers   ";
  for (const Fill& t : kFills) {
    if (!admin::replyHas(s, t.capacityBytes)) continue;
    std::snprintf(buf, sizeof buf, " %s %s/%s, %.0f evictions/s ", t.name,
                  humanBytes(replyCount(s, t.usedBytes)).c_str(),
                  humanBytes(replyCount(s, t.capacityBytes)).c_str(),
                  r.value(t.evictionsPerSecond, 0.0));
    o << buf;
  }
  o << "\n";
  const json& ps = streamsOf(s);
  if (ps.empty()) o << "prefetch no order registered\n";
  for (size_t i = 0; i < ps.size(); ++i) {
    const json& st = ps[i];
    std::snprintf(
        buf, sizeof buf,
        "prefetch rank %d epoch %lld: %llu/%llu, lead %llu files (%.1f s), %.1f stalls/s\n",
        rowValueOr(st, admin::kStatsStreamRank, 0),
        static_cast<long long>(rowValueOr(st, admin::kStatsStreamEpoch, int64_t{0})),
        static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamPosition, uint64_t{0})),
        static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamLength, uint64_t{0})),
        static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamLeadFiles, uint64_t{0})),
        rowValueOr(st, admin::kStatsStreamLeadSeconds, 0.0),
        i < r["streams"].size() ? r["streams"][i].value("stalls_per_s", 0.0) : 0.0);
    o << buf;
  }
  return o.str();
}

int StatsWatch::run() {
  const bool tty = !json_ && isatty(STDOUT_FILENO) != 0;
  json prev;
  for (long i = 0; count_ <= 0 || i <= count_; ++i) {
    json cur;
    {
      CtlClient client(mountpoint_, socket_);
      cur = client.call({{"cmd", admin::kCmdStats}});
    }
    cur.erase("ok");
    if (!prev.is_null()) {
      const json r = rates(prev, cur);
      if (json_) {
        std::cout << json{{"stats", cur}, {"rates", r}}.dump() << std::endl;
      } else {
        if (tty) std::cout << "\033[H\033[2J";
        std::cout << render(mountpoint_, seconds_, cur, r);
        if (!tty) std::cout << "\n";
        std::cout.flush();
      }
    } else if (!json_) {
      std::cout << "epochfs " << mountpoint_ << ": first sample, rates follow in " << seconds_
                << " s" << std::endl;
    }
    prev = std::move(cur);
    if (count_ > 0 && i == count_) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
  }
  return 0;
}

}  // namespace epochfs::ctl
