#include "tools/epochctl/stats_watch.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "fusefs/admin_protocol.h"
#include "tools/epochctl/ctl_client.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/progress_bar.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {

uint64_t at(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return 0;
    cur = &(*cur)[k];
  }
  return cur->is_number_unsigned() ? cur->get<uint64_t>() : 0;
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
  const double dt = cur.value("uptime_s", 0.0) - prev.value("uptime_s", 0.0);
  auto rate = [&](std::initializer_list<const char*> path) {
    const uint64_t a = at(prev, path), b = at(cur, path);
    return dt > 0 && b >= a ? static_cast<double>(b - a) / dt : 0.0;
  };
  const double ram = rate({"tiers", "ram", "hit_bytes"});
  const double disk = rate({"tiers", "disk", "hit_bytes"});
  const double peer = rate({"peer", "hit_bytes"});
  const double source = rate({"tiers", "source", "bytes"});
  const double served = ram + disk + peer + source;
  json r = {{"seconds", dt},
            {"read_requests_per_s", rate({"read_requests"})},
            {"read_bytes_per_s", rate({"read_bytes"})},
            {"ram_bytes_per_s", ram},
            {"disk_bytes_per_s", disk},
            {"peer_bytes_per_s", peer},
            {"source_bytes_per_s", source},
            {"source_read_bytes_per_s", rate({"tiers", "source", "read_bytes"})},
            {"hit_ratio", served > 0 ? json((ram + disk + peer) / served) : json(nullptr)},
            {"ram_evictions_per_s", rate({"tiers", "ram", "evictions"})},
            {"disk_evictions_per_s", rate({"tiers", "disk", "evictions"})}};
  json streams = json::array();
  const json& ps = cur["prefetch"]["streams"];
  for (size_t i = 0; ps.is_array() && i < ps.size(); ++i) {
    double stalls = 0;
    for (const json& q : prev["prefetch"]["streams"]) {
      if (q.value("rank", -1) == ps[i].value("rank", -2) && dt > 0) {
        stalls = static_cast<double>(
                     ps[i].value("stalls", uint64_t{0}) -
                     std::min(ps[i].value("stalls", uint64_t{0}), q.value("stalls", uint64_t{0}))) /
                 dt;
      }
    }
    streams.push_back({{"rank", ps[i].value("rank", 0)}, {"stalls_per_s", stalls}});
  }
  r["streams"] = streams;
  return r;
}

std::string StatsWatch::render(const std::string& mountpoint, double every, const json& s,
                               const json& r) {
  std::ostringstream o;
  char buf[320];
  o << "epochfs " << mountpoint << "  every " << every << " s  up "
    << ProgressBar::clock(s.value("uptime_s", 0.0)) << "  (Ctrl-C stops)\n";
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
  const uint64_t readBytes = at(s, {"read_bytes"});
  const uint64_t fromSource = at(s, {"tiers", "source", "bytes"});
  o << "hit      " << (r["hit_ratio"].is_number() ? pct(r["hit_ratio"].get<double>()) : "-")
    << " this interval, "
    << pct(readBytes ? 1.0 - static_cast<double>(std::min(readBytes, fromSource)) /
                                 static_cast<double>(readBytes)
                     : 0.0)
    << " since mount\n";
  o << "source   " << humanBytes(static_cast<uint64_t>(r.value("source_read_bytes_per_s", 0.0)))
    << "/s read, p50 " << micros(at(s, {"tiers", "source", "latency_us", "p50"})) << ", p99 "
    << micros(at(s, {"tiers", "source", "latency_us", "p99"})) << ", errors "
    << at(s, {"source_errors"}) << "\n";
  o << "tiers   ";
  for (const char* t : {"ram", "disk"}) {
    if (!s["tiers"].contains(t)) continue;
    std::snprintf(buf, sizeof buf, " %s %s/%s, %.0f evictions/s ", t,
                  humanBytes(at(s, {"tiers", t, "used_bytes"})).c_str(),
                  humanBytes(at(s, {"tiers", t, "capacity_bytes"})).c_str(),
                  r.value(std::string(t) + "_evictions_per_s", 0.0));
    o << buf;
  }
  o << "\n";
  const json& ps = s["prefetch"]["streams"];
  if (!ps.is_array() || ps.empty()) o << "prefetch no order registered\n";
  for (size_t i = 0; ps.is_array() && i < ps.size(); ++i) {
    const json& st = ps[i];
    std::snprintf(
        buf, sizeof buf,
        "prefetch rank %d epoch %lld: %llu/%llu, lead %llu files (%.1f s), %.1f stalls/s\n",
        st.value("rank", 0), static_cast<long long>(st.value("epoch", int64_t{0})),
        static_cast<unsigned long long>(st.value("position", uint64_t{0})),
        static_cast<unsigned long long>(st.value("length", uint64_t{0})),
        static_cast<unsigned long long>(st.value("lead_files", uint64_t{0})),
        st.value("lead_seconds", 0.0),
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
