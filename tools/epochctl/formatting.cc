#include "tools/epochctl/formatting.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tools/admin_client/reply_value.h"

namespace epochfs::ctl {

using nlohmann::json;

std::string humanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

namespace {

using admin::replyCount;
using admin::replyHas;
using admin::replyValueOr;
using admin::rowValueOr;

// A tier's line of `epochctl status` (the tiers in the reply's order).
struct StatusTier {
  const char* name;
  const char* usedBytes;
  const char* capacityBytes;
  const char* dir;  // nullptr: none
};
constexpr StatusTier kStatusTiers[] = {
    {"disk", admin::kStatusDiskUsedBytes, admin::kStatusDiskCapacityBytes, admin::kStatusDiskDir},
    {"ram", admin::kStatusRamUsedBytes, admin::kStatusRamCapacityBytes, nullptr}};

// A tier's row of `epochctl stats`: what READs found there, what it holds
// (the source holds nothing: no used/evictions paths).
struct StatsTier {
  const char* name;
  const char* servedBytes;
  const char* servedChunks;
  const char* usedBytes;
  const char* evictions;
};
constexpr StatsTier kStatsTiers[] = {
    {"ram", admin::kStatsRamHitBytes, admin::kStatsRamHitChunks, admin::kStatsRamUsedBytes,
     admin::kStatsRamEvictions},
    {"disk", admin::kStatsDiskHitBytes, admin::kStatsDiskHitChunks, admin::kStatsDiskUsedBytes,
     admin::kStatsDiskEvictions},
    {"source", admin::kStatsSourceBytes, admin::kStatsSourceChunks, nullptr, nullptr}};

}  // namespace

std::string formatStatus(const json& s) {
  std::ostringstream o;
  o << "epochfs " << s.value("version", "?") << " (pid " << s.value("pid", 0) << ")\n"
    << "source:     " << s.value("source", "") << "\n"
    << "mountpoint: " << s.value("mountpoint", "") << "\n";
  char up[32];
  std::snprintf(up, sizeof up, "%.0f s", replyValueOr(s, admin::kStatusUptime, 0.0));
  o << "uptime:     " << up << "\n";
  // An older daemon has no "libraries".
  if (const auto l = s.find("libraries"); l != s.end() && l->is_object()) {
    const auto text = [&](const char* key) {
      const auto v = l->find(key);
      return v != l->end() && v->is_string() ? v->get<std::string>() : std::string("?");
    };
    o << "fuse:       protocol " << text("fuse_protocol") << " (kernel offers "
      << text("kernel_fuse_protocol") << "), libfuse " << text("libfuse") << ", UCX " << text("ucx")
      << "\n";
  }
  const uint64_t pending = replyCount(s, admin::kStatusDatasetPendingAdditions);
  o << "dataset:    version " << replyCount(s, admin::kStatusDatasetVersion) << ", "
    << replyCount(s, admin::kStatusDatasetFiles) << " files, "
    << replyCount(s, admin::kStatusDatasetDirs) << " dirs, "
    << humanBytes(replyCount(s, admin::kStatusDatasetBytes))
    << " (snapshot at mount, kept up to date by refresh)";
  if (pending > 0) {
    o << "; " << pending << " entries the last refresh could not add (remount to see them)";
  }
  o << "\n";
  for (const StatusTier& t : kStatusTiers) {
    if (!replyHas(s, t.capacityBytes)) continue;
    const std::string name = t.name;
    o << "tier " << name << ":" << std::string(name.size() < 6 ? 6 - name.size() : 0, ' ')
      << humanBytes(replyCount(s, t.usedBytes)) << " / "
      << humanBytes(replyCount(s, t.capacityBytes));
    if (t.dir != nullptr && replyHas(s, t.dir)) {
      o << " in " << replyValueOr(s, t.dir, std::string());
    }
    o << "\n";
  }
  if (replyHas(s, admin::kStatusMembersCount)) {
    o << "members:    node " << replyCount(s, admin::kStatusMembersSelf) << " of "
      << replyCount(s, admin::kStatusMembersCount) << ", "
      << replyCount(s, admin::kStatusMembersLivePeers) << " peers live (epochctl peers)\n";
    if (!replyValueOr(s, admin::kStatusMembersFits, true)) {
      o << "capacity:   the dataset ("
        << humanBytes(replyCount(s, admin::kStatusMembersDatasetBytes))
        << " per replica) does not fit 95% of the live members' caches ("
        << humanBytes(replyCount(s, admin::kStatusMembersLiveCapacityBytes))
        << "): owned chunks are evicted and re-read from the source\n";
    }
  } else {
    o << "members:    not clustered\n";
  }
  const json& plan = s["plan"];
  if (plan.is_null()) {
    o << "plan:       no order registered\n";
  } else {
    o << "plan:       " << plan.value("streams", 0) << " stream(s) (" << plan.value("source", "")
      << "), " << plan.value("consumed", 0) << "/" << plan.value("entries", 0)
      << " entries read, epochs " << plan["epochs"].dump() << ", ranks " << plan["ranks"].dump()
      << "\n";
  }
  if (s.contains("admin")) {
    const json& a = s["admin"];
    o << "admin:      " << (a["socket"].is_string() ? a["socket"].get<std::string>() : "?");
    if (a["metrics_port"].is_number()) {
      o << "; metrics on http://127.0.0.1:" << a["metrics_port"].get<int>() << "/metrics";
    }
    o << "\n";
  }
  return o.str();
}

std::string formatStats(const json& s) {
  std::ostringstream o;
  const uint64_t readBytes = replyCount(s, admin::kStatsReadBytes);
  o << "FUSE reads:  " << replyCount(s, admin::kStatsReadRequests) << " requests, "
    << humanBytes(readBytes)
    << " (hits in the kernel page cache never reach the daemon and are not counted)\n";
  const uint64_t total =
      replyCount(s, admin::kStatsRamHitBytes) + replyCount(s, admin::kStatsStagingHitBytes) +
      replyCount(s, admin::kStatsDiskHitBytes) + replyCount(s, admin::kStatsSourceBytes);
  char line[200];
  std::snprintf(line, sizeof line, "%-8s %12s %12s %8s %12s %10s\n", "tier", "chunks", "bytes",
                "share", "used", "evictions");
  o << line;
  for (const StatsTier& t : kStatsTiers) {
    if (!replyHas(s, t.servedBytes)) continue;
    const bool src = t.usedBytes == nullptr;
    const uint64_t bytes = replyCount(s, t.servedBytes);
    const uint64_t chunks = replyCount(s, t.servedChunks);
    std::snprintf(line, sizeof line, "%-8s %12llu %12s %7.1f%% %12s %10s\n", t.name,
                  static_cast<unsigned long long>(chunks), humanBytes(bytes).c_str(),
                  total ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0,
                  src ? "-" : humanBytes(replyCount(s, t.usedBytes)).c_str(),
                  src ? "-" : std::to_string(replyCount(s, t.evictions)).c_str());
    o << line;
  }
  // Cluster mode: the RAM tier's own share and guests (docs/CLUSTER.md "Capacity").
  const bool hadGuests = replyCount(s, admin::kStatsRamGuestChunks) > 0 ||
                         replyCount(s, admin::kStatsRamGuestEvictions) > 0;
  if (hadGuests) {
    o << "ram held:  owned " << humanBytes(replyCount(s, admin::kStatsRamOwnedBytes)) << " ("
      << replyCount(s, admin::kStatsRamOwnedEvictions) << " evicted), guests "
      << humanBytes(replyCount(s, admin::kStatsRamGuestBytes)) << " ("
      << replyCount(s, admin::kStatsRamGuestEvictions) << " evicted)\n";
  }
  if (replyHas(s, admin::kStatsDiskHealthy)) {
    const bool healthy = replyValueOr(s, admin::kStatsDiskHealthy, true);
    const uint64_t errors = replyCount(s, admin::kStatsDiskErrors);
    if (!healthy || errors > 0) {
      o << "disk tier: " << (healthy ? "healthy" : "UNHEALTHY (reads go to the source)")
        << "; errors " << errors << ", probes " << replyCount(s, admin::kStatsDiskProbes)
        << "; last: " << replyValueOr(s, admin::kStatsDiskLastError, std::string()) << "\n";
    }
  }
  const uint64_t peer = replyCount(s, admin::kStatsPeerHitBytes);
  if (peer > 0) o << "peer     " << humanBytes(peer) << " from other nodes\n";
  const uint64_t fromSource = replyCount(s, admin::kStatsSourceBytes);
  std::snprintf(line, sizeof line,
                "hit ratio: %.1f%% of the bytes the daemon served came from a cache tier\n",
                readBytes
                    ? 100.0 * static_cast<double>(readBytes - std::min(readBytes, fromSource)) /
                          static_cast<double>(readBytes)
                    : 0.0);
  o << line;
  o << "source latency: p50 " << replyCount(s, admin::kStatsSourceLatencyP50) << " us, p99 "
    << replyCount(s, admin::kStatsSourceLatencyP99) << " us; errors "
    << replyCount(s, admin::kStatsSourceErrors) << "; coalesced misses "
    << replyCount(s, admin::kStatsCoalesced) << "; read from the source "
    << humanBytes(replyCount(s, admin::kStatsSourceReadBytes)) << "\n";
  if (replyHas(s, admin::kStatsPrefetchInflightBytes)) {
    const json* streams = admin::replyValue(s, admin::kStatsStreams);
    o << "prefetch: " << humanBytes(replyCount(s, admin::kStatsPrefetchInflightBytes))
      << " in flight";
    if (streams == nullptr || streams->empty()) o << ", no order registered";
    const std::string push =
        replyValueOr(s, admin::kStatsPrefetchPushPageCache, std::string("off"));
    if (push != "off") {
      o << "; page-cache push (" << push << "): " << replyCount(s, admin::kStatsPrefetchPushedFiles)
        << " files, " << humanBytes(replyCount(s, admin::kStatsPrefetchPushedBytes)) << ", "
        << replyCount(s, admin::kStatsPrefetchPushFailures) << " failures";
    }
    o << "\n";
    for (const json& st : streams != nullptr && streams->is_array() ? *streams : json::array()) {
      char buf[256];
      std::snprintf(
          buf, sizeof buf,
          "  rank %d epoch %lld: position %llu/%llu, lead %llu files (%.1f s), "
          "stalls %llu, hits %llu, prefetched %s\n",
          rowValueOr(st, admin::kStatsStreamRank, 0),
          static_cast<long long>(rowValueOr(st, admin::kStatsStreamEpoch, int64_t{0})),
          static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamPosition, uint64_t{0})),
          static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamLength, uint64_t{0})),
          static_cast<unsigned long long>(
              rowValueOr(st, admin::kStatsStreamLeadFiles, uint64_t{0})),
          rowValueOr(st, admin::kStatsStreamLeadSeconds, 0.0),
          static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamStalls, uint64_t{0})),
          static_cast<unsigned long long>(rowValueOr(st, admin::kStatsStreamHits, uint64_t{0})),
          humanBytes(rowValueOr(st, admin::kStatsStreamPrefetchedBytes, uint64_t{0})).c_str());
      o << buf;
    }
  }
  return o.str();
}

}  // namespace epochfs::ctl

namespace epochfs::ctl {

std::string formatRefresh(const json& r) {
  std::ostringstream o;
  o << "dataset version " << r.value("version", 0) << ": " << r.value("added", 0) << " added, "
    << r.value("removed", 0) << " removed, " << r.value("changed", 0) << " changed";
  char secs[32];
  std::snprintf(secs, sizeof secs, " (%.2f s)", r.value("seconds", 0.0));
  o << secs << "\n";
  auto list = [&](const char* key, const char* mark) {
    for (const json& p : r[key]) {
      std::string n = p.is_string() ? p.get<std::string>() : "<b64:" + p.value("b64", "") + ">";
      for (char& c : n) {
        if (static_cast<unsigned char>(c) < 0x20) c = '?';
      }
      o << "  " << mark << " " << n << "\n";
    }
  };
  list("added_paths", "+");
  list("removed_paths", "-");
  list("changed_paths", "~");
  if (r.value("truncated", false)) o << "  (lists truncated)\n";
  if (r.value("remount_needed", false)) {
    o << "some added entries could not be added (see the daemon's log); they appear after a"
         " remount\n";
  }
  return o.str();
}

}  // namespace epochfs::ctl
