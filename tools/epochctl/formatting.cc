#include "tools/epochctl/formatting.h"

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
  const json& d = s["dataset"];
  o << "dataset:    " << d.value("files", 0) << " files, " << d.value("dirs", 0) << " dirs, "
    << humanBytes(d.value("bytes", uint64_t{0})) << "\n";
  for (auto& [name, t] : s["tiers"].items()) {
    o << "tier " << name << ":" << std::string(name.size() < 6 ? 6 - name.size() : 0, ' ')
      << humanBytes(t.value("used_bytes", uint64_t{0})) << " / "
      << humanBytes(t.value("capacity_bytes", uint64_t{0})) << "\n";
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
  for (auto& [name, t] : s["tiers"].items()) {
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
  const json& lat = s["tiers"]["source"]["latency_us"];
  o << "source latency: p50 " << lat.value("p50", 0) << " us, p99 " << lat.value("p99", 0)
    << " us; errors " << s.value("source_errors", 0) << "; coalesced misses "
    << s.value("coalesced", 0) << "\n";
  if (s.contains("prefetch")) {
    const json& p = s["prefetch"];
    o << "prefetch: " << humanBytes(p.value("inflight_bytes", uint64_t{0})) << " in flight";
    if (p["streams"].empty()) o << ", no order registered";
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
