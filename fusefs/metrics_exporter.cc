#include "fusefs/metrics_exporter.h"

#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace epochfs::fusefs {

using nlohmann::json;

namespace {

// Writes families: # HELP, # TYPE once, then samples.
class Writer {
 public:
  explicit Writer(std::string baseLabels) : base_(std::move(baseLabels)) {}

  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    out_ << name << '{' << base_ << (labels.empty() ? "" : ",") << labels << "} ";
    char buf[64];
    if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9.0e15 && v > -9.0e15) {
      std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(v));
    } else {
      std::snprintf(buf, sizeof buf, "%.9g", v);
    }
    out_ << buf << '\n';
  }
  // One family with a single sample.
  void one(const std::string& name, const char* type, const char* help, double v) {
    family(name, type, help);
    sample(name, "", v);
  }
  std::string str() const { return out_.str(); }

 private:
  std::string base_;
  std::ostringstream out_;
};

double num(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<double>();
}

}  // namespace

std::string MetricsExporter::escapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string MetricsExporter::render(const json& status, const json& stats,
                                    const cache::LatencyHistogram& lat) const {
  Writer w("mountpoint=\"" + escapeLabel(mountpoint_) + "\"");
  w.family("epochfs_info", "gauge", "Always 1; the daemon's version as a label.");
  w.sample("epochfs_info", "version=\"" + escapeLabel(status.value("version", "")) + "\"", 1);
  w.one("epochfs_uptime_seconds", "gauge", "Seconds since the mount.", num(status, "uptime_s"));
  const json& ds = status["dataset"];
  w.one("epochfs_dataset_version", "gauge",
        "Dataset version (1 at mount, +1 per refresh that found changes).", num(ds, "version"));
  w.one("epochfs_dataset_files", "gauge", "Regular files in the mount-time snapshot.",
        num(ds, "files"));
  w.one("epochfs_dataset_bytes", "gauge", "Bytes of regular files in the mount-time snapshot.",
        num(ds, "bytes"));
  w.one("epochfs_dataset_pending_additions", "gauge",
        "Entries added to the source that only a remount shows (as of the last refresh).",
        num(ds, "pending_additions"));

  w.one("epochfs_read_requests_total", "counter", "FUSE READ requests answered with data.",
        num(stats, "read_requests"));
  w.one("epochfs_read_bytes_total", "counter", "Bytes returned by FUSE READ requests.",
        num(stats, "read_bytes"));
  w.one("epochfs_coalesced_misses_total", "counter",
        "Misses that waited for another reader's fetch of the same chunk.",
        num(stats, "coalesced"));

  const json& tiers = stats["tiers"];
  const json& src = tiers["source"];
  w.family("epochfs_served_bytes_total", "counter",
           "Bytes handed to READ requests, by the tier that had them (kernel page cache hits are "
           "invisible).");
  for (const char* t : {"ram", "staging", "disk"}) {
    if (tiers.contains(t))
      w.sample("epochfs_served_bytes_total", std::string("tier=\"") + t + "\"",
               num(tiers[t], "hit_bytes"));
  }
  w.sample("epochfs_served_bytes_total", "tier=\"peer\"", num(stats["peer"], "hit_bytes"));
  w.sample("epochfs_served_bytes_total", "tier=\"source\"", num(src, "bytes"));
  w.family("epochfs_served_chunks_total", "counter",
           "Chunk pieces handed to READ requests, by the tier that had them.");
  for (const char* t : {"ram", "staging", "disk"}) {
    if (tiers.contains(t))
      w.sample("epochfs_served_chunks_total", std::string("tier=\"") + t + "\"",
               num(tiers[t], "hit_chunks"));
  }
  w.sample("epochfs_served_chunks_total", "tier=\"peer\"", num(stats["peer"], "hit_chunks"));
  w.sample("epochfs_served_chunks_total", "tier=\"source\"", num(src, "chunks"));

  struct TierGauge {
    const char* name;
    const char* key;
    const char* type;
    const char* help;
  };
  const TierGauge gauges[] = {
      {"epochfs_tier_used_bytes", "used_bytes", "gauge", "Bytes a cache tier holds now."},
      {"epochfs_tier_capacity_bytes", "capacity_bytes", "gauge", "A cache tier's capacity."},
      {"epochfs_tier_chunks", "chunks", "gauge", "Chunks a cache tier holds now."},
      {"epochfs_tier_evictions_total", "evictions", "counter", "Chunks evicted to make room."},
      {"epochfs_tier_corruptions_total", "corruptions", "counter",
       "Chunks that failed verification and were dropped."},
  };
  // One family per gauge, one sample per present member of `parent`.
  const auto byLabel = [&](const TierGauge& g, const char* label, const json& parent,
                           std::initializer_list<const char*> members) {
    w.family(g.name, g.type, g.help);
    for (const char* m : members) {
      if (parent.contains(m))
        w.sample(g.name, std::string(label) + "=\"" + m + "\"", num(parent[m], g.key));
    }
  };
  for (const auto& g : gauges) byLabel(g, "tier", tiers, {"ram", "staging", "disk"});
  // The RAM tier's classes: owned (this node's share) and guest.
  const TierGauge classGauges[] = {
      {"epochfs_ram_class_bytes", "bytes", "gauge", "Bytes the RAM tier holds, by class."},
      {"epochfs_ram_class_chunks", "chunks", "gauge", "Chunks the RAM tier holds, by class."},
      {"epochfs_ram_class_evictions_total", "evictions", "counter",
       "RAM tier chunks evicted to make room, by class."},
  };
  for (const auto& g : classGauges) byLabel(g, "class", tiers["ram"], {"owned", "guest"});

  if (tiers.contains("disk") && tiers["disk"].contains("healthy")) {
    const json& d = tiers["disk"];
    w.one("epochfs_disk_healthy", "gauge",
          "1 while the disk tier is in use, 0 while it is out (failing disk).",
          d.value("healthy", false) ? 1 : 0);
    w.family("epochfs_disk_errors_total", "counter", "Disk tier I/O errors and timeouts, by kind.");
    w.sample("epochfs_disk_errors_total", "kind=\"read\"", num(d, "read_errors"));
    w.sample("epochfs_disk_errors_total", "kind=\"write\"", num(d, "write_errors"));
    w.sample("epochfs_disk_errors_total", "kind=\"timeout\"", num(d, "timeouts"));
    w.one("epochfs_disk_unhealthy_events_total", "counter",
          "Times the disk tier was taken out of use.", num(d, "unhealthy_events"));
    w.one("epochfs_disk_probes_total", "counter", "Health probes of an unhealthy disk tier.",
          num(d, "probes"));
    w.one("epochfs_disk_probe_failures_total", "counter", "Health probes that failed.",
          num(d, "probe_failures"));
  }

  w.one("epochfs_source_read_chunks_total", "counter", "Whole chunks read from the source.",
        num(src, "read_chunks"));
  w.one("epochfs_source_read_bytes_total", "counter", "Bytes read from the source.",
        num(src, "read_bytes"));
  w.one("epochfs_source_errors_total", "counter", "Source reads that failed.", num(src, "errors"));
  // The log2 histogram: bucket i holds [2^i, 2^(i+1)) us.
  w.family("epochfs_source_latency_seconds", "histogram",
           "Latency of one chunk read from the source.");
  uint64_t cumulative = 0;
  for (int i = 0; i < cache::LatencyHistogram::kBuckets; ++i) {
    cumulative += lat.counts[i].load(std::memory_order_relaxed);
    char le[32];
    std::snprintf(le, sizeof le, "%.9g", static_cast<double>(uint64_t{1} << (i + 1)) / 1e6);
    w.sample("epochfs_source_latency_seconds_bucket", std::string("le=\"") + le + "\"",
             static_cast<double>(cumulative));
  }
  w.sample("epochfs_source_latency_seconds_bucket", "le=\"+Inf\"", static_cast<double>(cumulative));
  w.sample("epochfs_source_latency_seconds_count", "", static_cast<double>(cumulative));

  const json& pf = stats["prefetch"];
  w.one("epochfs_prefetch_inflight_bytes", "gauge", "Prefetch and read-ahead bytes being read now.",
        num(pf, "inflight_bytes"));
  w.one("epochfs_prefetch_read_ahead_chunks_total", "counter",
        "Chunks read ahead of sequential readers.", num(pf, "read_ahead_chunks"));
  w.one("epochfs_prefetch_memory_bytes", "gauge", "The prefetch in-flight budget.",
        num(pf, "memory_bytes"));
  w.one("epochfs_prefetch_budget_waits_total", "counter",
        "Times prefetching paused because the in-flight budget was full.", num(pf, "budget_waits"));
  w.one("epochfs_prefetch_pushed_files_total", "counter",
        "Prefetched files pushed into the kernel's page cache.", num(pf, "pushed_files"));
  w.one("epochfs_prefetch_pushed_bytes_total", "counter",
        "Bytes pushed into the kernel's page cache.", num(pf, "pushed_bytes"));
  w.one("epochfs_prefetch_push_failures_total", "counter",
        "Pushes into the page cache the kernel refused.", num(pf, "push_failures"));
  const json& mem = stats["memory"];
  w.one("epochfs_memory_limit_bytes", "gauge",
        "The memory limit the defaults derive from (cgroup limit or MemTotal).",
        num(mem, "limit_bytes"));
  w.one("epochfs_resident_bytes", "gauge", "The daemon's resident set size.",
        num(mem, "rss_bytes"));
  struct StreamSeries {
    const char* name;
    const char* key;
    const char* type;
    const char* help;
  };
  const StreamSeries streams[] = {
      {"epochfs_prefetch_plan_entries", "length", "gauge", "Entries of a registered order."},
      {"epochfs_prefetch_position", "position", "gauge", "A stream's position in its order."},
      {"epochfs_prefetch_lead_files", "lead_files", "gauge",
       "Entries prefetched ahead of the reader."},
      {"epochfs_prefetch_lead_seconds", "lead_seconds", "gauge", "The lead in seconds of reading."},
      {"epochfs_prefetch_stalls_total", "stalls", "counter",
       "Planned reads that waited on the source."},
      {"epochfs_prefetch_hits_total", "hits", "counter", "Planned reads served from a cache tier."},
      {"epochfs_prefetch_files_total", "prefetched_files", "counter",
       "Entries the prefetcher fetched."},
      {"epochfs_prefetch_bytes_total", "prefetched_bytes", "counter",
       "Bytes the prefetcher fetched."},
  };
  size_t count = pf.contains("streams") && pf["streams"].is_array() ? pf["streams"].size() : 0;
  for (const auto& s : streams) {
    w.family(s.name, s.type, s.help);
    for (size_t i = 0; i < count && i < 256; ++i) {
      const json& st = pf["streams"][i];
      w.sample(s.name, "rank=\"" + std::to_string(st.value("rank", 0)) + "\"", num(st, s.key));
    }
  }

  const json& warm = stats["warm"];
  w.one("epochfs_warm_jobs_total", "counter", "warm commands run.", num(warm, "jobs"));
  w.one("epochfs_warm_files_total", "counter", "Files warm fetched.", num(warm, "files"));
  w.one("epochfs_warm_bytes_total", "counter", "Bytes warm fetched (from any tier).",
        num(warm, "bytes"));
  w.one("epochfs_warm_errors_total", "counter", "Files warm could not fetch.", num(warm, "errors"));
  const json& ev = stats["evict"];
  w.one("epochfs_evicted_chunks_total", "counter", "Chunk copies dropped by evict commands.",
        num(ev, "chunks"));
  w.one("epochfs_evicted_bytes_total", "counter", "Bytes dropped by evict commands.",
        num(ev, "bytes"));
  w.one("epochfs_refreshes_total", "counter", "refresh commands run.", num(stats, "refreshes"));

  const json& adm = stats["admin"];
  const StreamSeries admin[] = {
      {"epochfs_admin_connections_total", "connections", "counter", "Admin connections served."},
      {"epochfs_admin_refused_total", "refused", "counter",
       "Admin connections refused (connection limit reached)."},
      {"epochfs_admin_requests_total", "requests", "counter", "Admin requests handled."},
      {"epochfs_admin_errors_total", "errors", "counter", "Admin requests answered with an error."},
      {"epochfs_admin_denied_total", "denied", "counter",
       "Admin requests refused for permissions."},
      {"epochfs_admin_oversized_total", "oversized", "counter",
       "Admin messages over the 64 KiB cap (connection closed)."},
      {"epochfs_admin_timeouts_total", "timeouts", "counter",
       "Admin connections closed idle or mid-message after the receive timeout."},
  };
  for (const auto& s : admin) w.one(s.name, s.type, s.help, num(adm, s.key));

  // Cluster mode only (status.members is null otherwise): peer health.
  const json& members = status["members"];
  if (members.is_object()) {
    w.one("epochfs_peers_live", "gauge", "Members in placement (this node included).",
          num(members, "live_peers"));
    w.one("epochfs_cluster_fits", "gauge",
          "1 while the dataset fits 95% of the live members' caches, 0 when it does not.",
          members.value("fits", true) ? 1 : 0);
    w.one("epochfs_peers_suspect", "gauge",
          "Peers suspect now (missed a deadline or sent bad payloads).",
          num(members, "suspect_peers"));
    w.one("epochfs_peer_suspicions_total", "counter",
          "Times a peer was made suspect for bad payloads.", num(members, "suspect_count"));
    w.family("epochfs_peer_bad_payloads_total", "counter",
             "Peer replies rejected by the payload MAC or the XXH3 checksum (fetched elsewhere).");
    w.sample("epochfs_peer_bad_payloads_total", "check=\"mac\"", num(members, "mac_failures"));
    w.sample("epochfs_peer_bad_payloads_total", "check=\"checksum\"",
             num(members, "checksum_failures"));
    w.family("epochfs_peer_refused_requests_total", "counter",
             "Peer requests refused: file outside the snapshot or another version.");
    w.sample("epochfs_peer_refused_requests_total", "by=\"self\"", num(members, "serve_refused"));
    w.sample("epochfs_peer_refused_requests_total", "by=\"peer\"", num(members, "fetch_refused"));
  }
  return w.str();
}

}  // namespace epochfs::fusefs
