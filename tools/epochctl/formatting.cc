#include "tools/epochctl/formatting.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

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

std::string formatStatus(const json& s) {
  std::ostringstream o;
  o << "epochfs " << s.value("version", "?") << " (pid " << s.value("pid", 0) << ")\n"
    << "source:     " << s.value("source", "") << "\n"
    << "mountpoint: " << s.value("mountpoint", "") << "\n";
  char up[32];
  std::snprintf(up, sizeof up, "%.0f s", s.value("uptime_s", 0.0));
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
  const json& d = s["dataset"];
  o << "dataset:    version " << d.value("version", 0) << ", " << d.value("files", 0) << " files, "
    << d.value("dirs", 0) << " dirs, " << humanBytes(d.value("bytes", uint64_t{0}))
    << " (snapshot at mount)";
  if (d.value("pending_additions", 0) > 0) {
    o << "; " << d["pending_additions"].get<uint64_t>()
      << " entries added in the source since (remount to see them)";
  }
  o << "\n";
  for (auto& [name, t] : s["tiers"].items()) {
    o << "tier " << name << ":" << std::string(name.size() < 6 ? 6 - name.size() : 0, ' ')
      << humanBytes(t.value("used_bytes", uint64_t{0})) << " / "
      << humanBytes(t.value("capacity_bytes", uint64_t{0}));
    if (t.contains("dir")) o << " in " << t["dir"].get<std::string>();
    o << "\n";
  }
  const json& m = s["members"];
  if (m.is_object()) {
    o << "members:    node " << m.value("self", 0) << " of " << m.value("count", 0) << ", "
      << m.value("live_peers", 0) << " peers live (epochctl peers)\n";
    if (!m.value("fits", true)) {
      o << "capacity:   the dataset (" << humanBytes(m.value("dataset_bytes", uint64_t{0}))
        << " per replica) does not fit 95% of the live members' caches ("
        << humanBytes(m.value("live_capacity_bytes", uint64_t{0}))
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
  const uint64_t readBytes = s.value("read_bytes", uint64_t{0});
  o << "FUSE reads:  " << s.value("read_requests", uint64_t{0}) << " requests, "
    << humanBytes(readBytes)
    << " (hits in the kernel page cache never reach the daemon and are not counted)\n";
  uint64_t total = 0;
  for (auto& [name, t] : s["tiers"].items()) {
    total += name == "source" ? t.value("bytes", uint64_t{0}) : t.value("hit_bytes", uint64_t{0});
  }
  char line[200];
  std::snprintf(line, sizeof line, "%-8s %12s %12s %8s %12s %10s\n", "tier", "chunks", "bytes",
                "share", "used", "evictions");
  o << line;
  for (const std::string name : {"ram", "disk", "source"}) {
    if (!s["tiers"].contains(name)) continue;
    const json& t = s["tiers"][name];
    const bool src = name == "source";
    const uint64_t bytes = t.value(src ? "bytes" : "hit_bytes", uint64_t{0});
    const uint64_t chunks = t.value(src ? "chunks" : "hit_chunks", uint64_t{0});
    std::snprintf(line, sizeof line, "%-8s %12llu %12s %7.1f%% %12s %10s\n", name.c_str(),
                  static_cast<unsigned long long>(chunks), humanBytes(bytes).c_str(),
                  total ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0,
                  src ? "-" : humanBytes(t.value("used_bytes", uint64_t{0})).c_str(),
                  src ? "-" : std::to_string(t.value("evictions", uint64_t{0})).c_str());
    o << line;
  }
  // Cluster mode: the RAM tier's own share and guests (docs/CLUSTER.md "Capacity").
  const json& ram = s["tiers"]["ram"];
  const bool hadGuests =
      ram.contains("guest") && (ram["guest"].value("chunks", uint64_t{0}) > 0 ||
                                ram["guest"].value("evictions", uint64_t{0}) > 0);
  if (hadGuests) {
    o << "ram held:  owned " << humanBytes(ram["owned"].value("bytes", uint64_t{0})) << " ("
      << ram["owned"].value("evictions", uint64_t{0}) << " evicted), guests "
      << humanBytes(ram["guest"].value("bytes", uint64_t{0})) << " ("
      << ram["guest"].value("evictions", uint64_t{0}) << " evicted)\n";
  }
  if (s["tiers"].contains("disk") && s["tiers"]["disk"].contains("healthy")) {
    const json& d = s["tiers"]["disk"];
    const bool healthy = d.value("healthy", true);
    if (!healthy || d.value("errors", uint64_t{0}) > 0) {
      o << "disk tier: " << (healthy ? "healthy" : "UNHEALTHY (reads go to the source)")
        << "; errors " << d.value("errors", uint64_t{0}) << ", probes "
        << d.value("probes", uint64_t{0}) << "; last: " << d.value("last_error", std::string())
        << "\n";
    }
  }
  const uint64_t peer = s.contains("peer") ? s["peer"].value("hit_bytes", uint64_t{0}) : 0;
  if (peer > 0) o << "peer     " << humanBytes(peer) << " from other nodes\n";
  const uint64_t fromSource = s["tiers"]["source"].value("bytes", uint64_t{0});
  std::snprintf(line, sizeof line,
                "hit ratio: %.1f%% of the bytes the daemon served came from a cache tier\n",
                readBytes
                    ? 100.0 * static_cast<double>(readBytes - std::min(readBytes, fromSource)) /
                          static_cast<double>(readBytes)
                    : 0.0);
  o << line;
  const json& lat = s["tiers"]["source"]["latency_us"];
  o << "source latency: p50 " << lat.value("p50", 0) << " us, p99 " << lat.value("p99", 0)
    << " us; errors " << s.value("source_errors", 0) << "; coalesced misses "
    << s.value("coalesced", 0) << "; read from the source "
    << humanBytes(s["tiers"]["source"].value("read_bytes", uint64_t{0})) << "\n";
  if (s.contains("prefetch")) {
    const json& p = s["prefetch"];
    o << "prefetch: " << humanBytes(p.value("inflight_bytes", uint64_t{0})) << " in flight";
    if (p["streams"].empty()) o << ", no order registered";
    const std::string push = p.value("push_page_cache", std::string("off"));
    if (push != "off") {
      o << "; page-cache push (" << push << "): " << p.value("pushed_files", uint64_t{0})
        << " files, " << humanBytes(p.value("pushed_bytes", uint64_t{0})) << ", "
        << p.value("push_failures", uint64_t{0}) << " failures";
    }
    o << "\n";
    for (const json& st : p["streams"]) {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    "  rank %d epoch %lld: position %llu/%llu, lead %llu files (%.1f s), "
                    "stalls %llu, hits %llu, prefetched %s\n",
                    st.value("rank", 0), static_cast<long long>(st.value("epoch", int64_t{0})),
                    static_cast<unsigned long long>(st.value("position", uint64_t{0})),
                    static_cast<unsigned long long>(st.value("length", uint64_t{0})),
                    static_cast<unsigned long long>(st.value("lead_files", uint64_t{0})),
                    st.value("lead_seconds", 0.0),
                    static_cast<unsigned long long>(st.value("stalls", uint64_t{0})),
                    static_cast<unsigned long long>(st.value("hits", uint64_t{0})),
                    humanBytes(st.value("prefetched_bytes", uint64_t{0})).c_str());
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
    o << "added entries appear after a remount; changed and removed ones are applied now"
         " (the kernel may keep old pages of changed files until it drops them)\n";
  }
  return o.str();
}

}  // namespace epochfs::ctl
