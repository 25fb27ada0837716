// membership-sim: the peer-health logic and membership of a large job, in
// one process. N nodes, each with the real PeerHealth over all N members, on
// an in-process fabric with a virtual clock (membership_sim_fabric.h: what
// UcxCluster's progress thread does, one-way latency per message, no CPU
// cost). Scenarios, in this order:
//   startup  every node connects to every other (4-message handshake):
//            time until every node sees all N live, messages a node;
//   steady   --steady-s with requests: epochfs pings a second a node (probes
//            of up members, each every ~--probe-interval-ms; pings of
//            suspects) and UCX's keepalive probes beside them;
//   kill     one member's process dies (endpoint errors after one latency):
//            when the first, the median and the last node drop it from its
//            live set; restarted after --down-s: until every node has it again;
//   freeze   one member stops (SIGSTOP, partition: no error). A probe or a
//            request to it that misses its 2 s deadline reveals it. Requests
//            alone (--probe-interval-ms 0): a node asks a given member r/(N-1)
//            times a second, ~(N-1)/r + 2 s for a typical node and a long tail
//            for the last; probes bound it by 1.25 x the interval + 2 s.
//            Frozen until every node noticed or --max-freeze-s; then thawed:
//            until all have it again;
//   placement  the wall time of one real PlacementTable build over N-1
//            members and --files files (each node builds it on its builder
//            thread in parallel: added once to the last node's noticing time);
//   memory   heap of the N PeerHealth instances over N, and of one built table;
//   scan     wall time of due() + nextTimer() a progress-loop turn, N members up.
// Requests run all along: --request-rate a node, to uniform live members.
//
//   membership-sim [--members 1024] [--latency-us 20] [--request-rate 200]
//                  [--files 1000000] [--build-repeats 3] [--seed 1] [--json]
//                  [--down-s 10] [--steady-s 20] [--max-freeze-s 60]
//                  [--probe-interval-ms 5000]
// Prints a few lines, or with --json one line with every figure. About 10 s
// and 0.4 GB at the defaults (the PeerHealth instances: N x N entries).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tools/bench/peerbench/membership_sim_fabric.h"
#include "tools/bench/peerbench/synthetic_files.h"
#include "transport/placement_table.h"

using namespace epochfs::membersim;
using epochfs::transport::Candidate;
using epochfs::transport::FileBytes;
using epochfs::transport::PlacementTable;

namespace {

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// When the nodes other than `skip` noticed, from `t0` (ms): how many, the
// first, the median and the last.
struct Spread {
  uint32_t noticed = 0;
  double first = 0, p50 = 0, last = 0;
};
Spread spread(const std::vector<int64_t>& at, uint32_t skip, int64_t t0) {
  std::vector<int64_t> v;
  for (uint32_t i = 0; i < at.size(); ++i)
    if (i != skip && at[i] >= 0) v.push_back(at[i] - t0);
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.noticed = static_cast<uint32_t>(v.size());
  s.first = ms(v.front());
  s.p50 = ms(v[v.size() / 2]);
  s.last = ms(v.back());
  return s;
}

struct Build {
  double ms = 0, minMs = 0, maxMs = 0;
  uint64_t tableBytes = 0;
};
// A bounded-load table over `nodes` equal members, files as placement-bench
// makes them: the median wall time of `repeats` builds, the heap of one table.
Build buildPlacement(int files, uint32_t nodes, uint64_t seed, int repeats) {
  uint64_t d = 0;
  const std::vector<FileBytes> f = epochfs::bench::syntheticFiles(files, seed, &d);
  std::vector<Candidate> live;
  std::vector<uint64_t> caps;
  for (uint32_t n = 0; n < nodes; ++n) {
    live.push_back({n, 1.0});
    caps.push_back(d / nodes * 4 / 3);
  }
  Build b;
  std::vector<double> wall;
  for (int r = 0; r < repeats; ++r) {
    const uint64_t before = heapInUse();
    const auto t0 = std::chrono::steady_clock::now();
    const PlacementTable t = PlacementTable::build(f, live, caps, 1);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    b.tableBytes = heapInUse() - before;
  }
  std::sort(wall.begin(), wall.end());
  b.ms = wall[wall.size() / 2];
  b.minMs = wall.front();
  b.maxMs = wall.back();
  return b;
}

// The progress thread's cost of PeerHealth each loop turn: due() and
// nextTimer() scan every member. Wall microseconds a turn, one node with all
// `n` members up (the median of 5 batches of 2,000 turns).
double scanMicros(uint32_t n) {
  std::vector<epochfs::transport::Member> members;
  for (uint32_t id = 0; id < n; ++id) members.push_back({id, "10.0.0.1", 7711});
  PeerHealth ph(members, 0, 1, PeerHealth::Options{}, nullptr);
  const auto t = epochfs::transport::PeerHealth::Clock::time_point{} + std::chrono::hours(1);
  for (uint32_t id = 1; id < n; ++id) {
    ph.connecting(id, t);
    ph.connected(id, t);
  }
  std::vector<double> us;
  for (int batch = 0; batch < 5; ++batch) {
    const auto w0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 2000; ++k) {
      (void)ph.due(t + std::chrono::milliseconds(1));
      (void)ph.nextTimer(t + std::chrono::seconds(1));
    }
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0).count() /
        2000);
  }
  std::sort(us.begin(), us.end());
  return us[2];
}

}  // namespace

int main(int argc, char** argv) {
  FabricOptions o;
  double latencyUs = 20, downS = 10, steadyS = 20, maxFreezeS = 60;
  int files = 1000000, buildRepeats = 3;
  bool json = false;
  CLI::App app{"membership-sim: PeerHealth of N members over an in-process fabric",
               "membership-sim"};
  app.add_option("--members", o.members, "Members of the job")->check(CLI::Range(2, 65536));
  app.add_option("--latency-us", latencyUs, "One-way message latency")
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--request-rate", o.requestRate, "Chunk requests a second a node")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--files", files, "Files of the placement build (0: none)")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--build-repeats", buildRepeats, "Placement builds (the median is used)")
      ->check(CLI::Range(1, 100));
  app.add_option("--probe-interval-ms", o.probeIntervalMs,
                 "Probe each up member about this often (0: never, requests alone)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--seed", o.seed, "Random seed (requests, fault targets, file ids)");
  app.add_option("--down-s", downS, "Seconds the killed member stays dead")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--steady-s", steadyS, "Seconds of steady state")->check(CLI::Range(0.1, 600.0));
  app.add_option("--max-freeze-s", maxFreezeS, "Thaw after this even if some node has not noticed")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_flag("--json", json, "One JSON line with every figure");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::off);  // a million "peer up" lines otherwise
  o.latencyNs = static_cast<int64_t>(latencyUs * 1000);
  const uint32_t n = o.members;
  const auto wall0 = std::chrono::steady_clock::now();
  std::mt19937_64 pick(o.seed ^ 0x9e3779b97f4a7c15ULL);

  Fabric f(o);
  const double phPerNode = static_cast<double>(f.peerHealthHeapBytes()) / n;

  // Startup.
  const int64_t startEnd = f.run(30 * kSec, [&] { return f.fullNodes() == n; });
  const bool startedAll = f.fullNodes() == n;
  const Counters c0 = f.counters();

  // Steady state.
  const int64_t s0 = f.now();
  f.run(s0 + static_cast<int64_t>(steadyS * kSec));
  const Counters c1 = f.counters();
  const double steadyPings = (c1.pings - c0.pings) / (n * steadyS);
  const double steadyRequests = (c1.requests - c0.requests) / (n * steadyS);

  // Kill, then restart.
  const uint32_t killed = static_cast<uint32_t>(pick() % n);
  f.watch(killed);
  const int64_t k0 = f.now();
  f.kill(killed);
  f.run(k0 + 30 * kSec, [&] { return f.watchedLiveAt() == 0; });
  const Spread kill = spread(f.leftAt(), killed, k0);
  f.run(k0 + static_cast<int64_t>(downS * kSec));
  const int64_t r0 = f.now();
  f.restart(killed);
  int64_t killerSeesAll = -1;
  const int64_t rEnd = f.run(r0 + 30 * kSec, [&] {
    if (killerSeesAll < 0 && f.seesAll(killed)) killerSeesAll = f.now() - r0;
    return f.watchedLiveAt() == n - 1 && killerSeesAll >= 0;
  });
  const double killBackMs = f.watchedLiveAt() == n - 1 ? ms(rEnd - r0) : -1;
  const Counters cr = f.counters();
  f.run(f.now() + 2 * kSec);

  // Freeze until every node noticed (or the cap), then thaw.
  uint32_t frozen = static_cast<uint32_t>(pick() % n);
  if (frozen == killed) frozen = (frozen + 1) % n;
  f.watch(frozen);
  const Counters cf0 = f.counters();
  const int64_t f0 = f.now();
  f.freeze(frozen);
  f.run(f0 + static_cast<int64_t>(maxFreezeS * kSec), [&] { return f.watchedLiveAt() == 0; });
  const int64_t t0 = f.now();
  const Counters cf1 = f.counters();
  const Spread freeze = spread(f.leftAt(), frozen, f0);
  double suspectNodeS = 0;  // the seconds nodes held it suspect, summed
  for (uint32_t i = 0; i < n; ++i)
    if (i != frozen && f.leftAt()[i] >= 0)
      suspectNodeS += static_cast<double>(t0 - f.leftAt()[i]) / kSec;
  const double pingsPerSuspecting = suspectNodeS > 0 ? (cf1.pings - cf0.pings) / suspectNodeS : 0;
  const uint64_t misses = cf1.deadlineMisses - cf0.deadlineMisses;
  const double pingsFreezeAll = (cf1.pings - cf0.pings) / (n * static_cast<double>(t0 - f0) / kSec);
  f.thaw(frozen);
  const int64_t tEnd = f.run(t0 + 30 * kSec, [&] { return f.watchedLiveAt() == n - 1; });
  const double thawBackMs = f.watchedLiveAt() == n - 1 ? ms(tEnd - t0) : -1;
  const double peers = n - 1, r = o.requestRate, dl = 2000;
  const double expMean = r > 0 ? peers / r * 1000 + dl : -1;
  const double expP50 = r > 0 ? std::log(2.0) * peers / r * 1000 + dl : -1;
  const double expLast = r > 0 ? peers / r * (std::log(peers) + 0.5772) * 1000 + dl : -1;
  const Counters cEnd = f.counters();
  const double simS = static_cast<double>(f.now()) / kSec;

  // Placement build and table memory.
  const Build b = files > 0 ? buildPlacement(files, n - 1, o.seed, buildRepeats) : Build{};
  const double scanUs = scanMicros(n);
  // UCX keepalive (UCX 1.13 defaults here, `ucx_info -c`): every 20 s a round
  // probes at most 128 of the worker's endpoints: N-1 outbound, N-1 inbound.
  const double eps = 2.0 * peers;
  const double kaPerS = std::min(eps, 128.0) / 20.0;
  const double kaPeriodS = std::ceil(eps / 128.0) * 20.0;
  const double kaAllPerS = eps / 20.0;
  const double wallS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  if (json) {
    std::printf(
        "{\"members\":%u,\"latency_us\":%.1f,\"request_rate\":%.1f,\"files\":%d,\"seed\":%llu,"
        "\"startup_ms\":%.3f,\"startup_all\":%s,\"startup_msgs_per_node\":%.1f,"
        "\"live_changes_startup\":%llu,\"steady_pings_per_s_node\":%.3f,"
        "\"steady_requests_per_s_node\":%.1f,\"kill_node\":%u,\"kill_noticed\":%u,"
        "\"kill_first_ms\":%.3f,\"kill_p50_ms\":%.3f,\"kill_last_ms\":%.3f,"
        "\"kill_retries_refused\":%llu,\"kill_back_ms\":%.3f,\"killed_sees_all_ms\":%.3f,"
        "\"freeze_node\":%u,\"freeze_noticed\":%u,\"freeze_s\":%.3f,\"freeze_first_ms\":%.1f,"
        "\"freeze_p50_ms\":%.1f,\"freeze_last_ms\":%.1f,\"freeze_expected_mean_ms\":%.1f,"
        "\"freeze_expected_p50_ms\":%.1f,\"freeze_expected_last_ms\":%.1f,"
        "\"freeze_deadline_misses\":%llu,\"pings_per_s_suspecting_node\":%.3f,\"pings_per_s_node_"
        "during_freeze\":%.3f,"
        "\"thaw_back_ms\":%.3f,\"ucx_keepalive_eps\":%.0f,\"ucx_keepalive_per_s_node\":%.2f,"
        "\"ucx_keepalive_period_s\":%.0f,\"ucx_keepalive_all_eps_per_s_node\":%.2f,"
        "\"placement_build_ms\":%.1f,\"placement_build_min_ms\":%.1f,"
        "\"placement_build_max_ms\":%.1f,\"placement_after_kill_ms\":%.1f,"
        "\"placement_after_freeze_p50_ms\":%.1f,\"placement_after_freeze_last_ms\":%.1f,"
        "\"peer_health_bytes_per_node\":%.0f,\"peer_health_bytes_per_entry\":%.1f,"
        "\"placement_table_bytes_per_node\":%llu,\"scan_us_per_turn\":%.2f,\"events\":%llu,\"sim_"
        "s\":%.1f,\"wall_s\":%.2f}\n",
        n, latencyUs, r, files, static_cast<unsigned long long>(o.seed), ms(startEnd),
        startedAll ? "true" : "false", static_cast<double>(c0.handshakeMsgs) / n,
        static_cast<unsigned long long>(c0.liveChanges), steadyPings, steadyRequests, killed,
        kill.noticed, kill.first, kill.p50, kill.last,
        static_cast<unsigned long long>(cr.refused - c1.refused), killBackMs,
        killerSeesAll >= 0 ? ms(killerSeesAll) : -1.0, frozen, freeze.noticed,
        static_cast<double>(t0 - f0) / kSec, freeze.first, freeze.p50, freeze.last, expMean, expP50,
        expLast, static_cast<unsigned long long>(misses), pingsPerSuspecting, pingsFreezeAll,
        thawBackMs, eps, kaPerS, kaPeriodS, kaAllPerS, b.ms, b.minMs, b.maxMs, kill.last + b.ms,
        freeze.p50 + b.ms, freeze.last + b.ms, phPerNode, phPerNode / n,
        static_cast<unsigned long long>(b.tableBytes), scanUs,
        static_cast<unsigned long long>(cEnd.events), simS, wallS);
    return 0;
  }
  std::printf(
      "membership-sim: %u members, one-way latency %.1f us, %.0f requests/s a node, "
      "deadline 2 s, seed %llu\n",
      n, latencyUs, r, static_cast<unsigned long long>(o.seed));
  std::printf(
      "startup: %s after %.3f ms; %.0f handshake messages a node; %llu live-set "
      "changes (placement rebuild requests)\n",
      startedAll ? "every node sees all live" : "NOT all live", ms(startEnd),
      static_cast<double>(c0.handshakeMsgs) / n, static_cast<unsigned long long>(c0.liveChanges));
  std::printf("steady (%.0f s): %.3f epochfs pings/s a node, %.1f requests/s a node\n", steadyS,
              steadyPings, steadyRequests);
  std::printf(
      "UCX keepalive: %.0f endpoints a node; <= 128 probed a 20 s round: %.2f probes/s "
      "a node, each endpoint every %.0f s (%.1f/s if every endpoint every round)\n",
      eps, kaPerS, kaPeriodS, kaAllPerS);
  std::printf(
      "kill node %u: out of the live set of %u/%u nodes: first %.3f ms, p50 %.3f, last "
      "%.3f; %llu refused reconnects while dead\n",
      killed, kill.noticed, n - 1, kill.first, kill.p50, kill.last,
      static_cast<unsigned long long>(cr.refused - c1.refused));
  std::printf(
      "  restarted after %.0f s: every node has it live again after %.3f ms; it sees "
      "all live after %.3f ms\n",
      downS, killBackMs, killerSeesAll >= 0 ? ms(killerSeesAll) : -1.0);
  std::printf(
      "freeze node %u: noticed by %u/%u nodes within %.1f s: first %.1f ms, p50 %.1f, "
      "last %.1f (by requests alone: mean %.0f, p50 %.0f, last ~%.0f)\n",
      frozen, freeze.noticed, n - 1, static_cast<double>(t0 - f0) / kSec, freeze.first, freeze.p50,
      freeze.last, expMean, expP50, expLast);
  std::printf(
      "  %llu requests waited out the deadline; pings: %.2f/s a suspecting node, %.3f/s "
      "a node over the freeze; thawed: every node has it live again after %.3f ms\n",
      static_cast<unsigned long long>(misses), pingsPerSuspecting, pingsFreezeAll, thawBackMs);
  if (files > 0) {
    std::printf(
        "placement: a build over %u members, %d files: %.1f ms wall (median of %d, "
        "%.1f-%.1f); every node on the new placement: %.1f ms after the kill, after the "
        "freeze p50 %.1f / last %.1f ms\n",
        n - 1, files, b.ms, buildRepeats, b.minMs, b.maxMs, kill.last + b.ms, freeze.p50 + b.ms,
        freeze.last + b.ms);
  }
  std::printf(
      "memory: PeerHealth %.1f KiB a node (%.0f B a member entry); placement table %.1f "
      "MiB a node (%d files)\n",
      phPerNode / 1024, phPerNode / n, static_cast<double>(b.tableBytes) / (1 << 20), files);
  std::printf("progress loop: %.2f us a turn for PeerHealth's due() and nextTimer() (wall)\n",
              scanUs);
  std::printf("simulated %.1f s, %llu events, %.2f s wall\n", simS,
              static_cast<unsigned long long>(cEnd.events), wallS);
  return 0;
}
