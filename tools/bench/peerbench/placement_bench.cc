// placement-bench: what PlacementTable::build costs and what it gives (the
// bounded-load placement every node computes on each live-set change, on the
// placement builder's thread). Files of log-normal size around 110 KB with
// random ids, equal capacities of 4/3 of each node's share, one owner a
// file; median of --repeats builds per case.
//
// Prints one JSON line per case:
//   {"files":F,"nodes":N,"ms":median wall,"cpu_ms":median CPU,"min_ms":m,"max_ms":M,
//    "peak_mb":the build's peak RSS growth,"min_files":a,"max_files":b,
//    "count_spread":max |count - share| / share,"max_fill":most bytes / capacity,
//    "count_band":--count-band,"leave_ratio":x,"leave_ratio_max":y}
// leave_ratio: the files whose owner changes when one node leaves (the
// others keep their capacities), its own included, over the files it owned
// (1.0: only its own move), the mean over --leavers nodes leaving one at a
// time (0: no second build).
//
//   placement-bench [--files 10000,1000000] [--nodes 4,64,1024] [--repeats 3] [--no-leave]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tools/bench/peerbench/synthetic_files.h"
#include "transport/placement_table.h"

using namespace epochfs::transport;

namespace {

double cpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// VmHWM and VmRSS of this process in MB; writing 5 to clear_refs resets the
// high-water mark to the current RSS.
double statusMb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  return 0;
}
void resetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> fileCounts = {10000, 1000000}, nodeCounts = {4, 64, 1024};
  int repeats = 3;
  int leavers = 3;
  double countBand = PlacementTable::kCountBand;
  CLI::App app{"placement-bench: cost and outcome of PlacementTable::build", "placement-bench"};
  app.add_option("--files", fileCounts, "File counts")->delimiter(',');
  app.add_option("--nodes", nodeCounts, "Node counts")->delimiter(',')->check(CLI::Range(2, 65536));
  app.add_option("--repeats", repeats, "Builds per case (the median is printed)")
      ->check(CLI::Range(1, 100));
  app.add_option("--leavers", leavers, "Nodes that leave, one at a time (0: none)")
      ->check(CLI::Range(0, 64));
  app.add_option("--count-band", countBand,
                 "Each node's file count within this fraction of its share (default 0.02; "
                 "wider: a leave moves fewer files)")
      ->check(CLI::Range(0.0, 100.0));
  CLI11_PARSE(app, argc, argv);
  for (int files : fileCounts) {
    uint64_t d = 0;
    const std::vector<FileBytes> f = epochfs::bench::syntheticFiles(files, 1, &d);
    for (int nodes : nodeCounts) {
      std::vector<Candidate> live;
      std::vector<uint64_t> caps;
      for (int n = 0; n < nodes; ++n) {
        live.push_back({static_cast<uint32_t>(n), 1.0});
        caps.push_back(d / static_cast<uint64_t>(nodes) * 4 / 3);
      }
      std::vector<double> ms, cpu;
      double peakMb = 0;
      PlacementTable all;
      for (int r = 0; r < repeats; ++r) {
        all = PlacementTable();
        resetPeak();
        const double rssBefore = statusMb("VmRSS:");
        const double c0 = cpuMs();
        const auto t0 = std::chrono::steady_clock::now();
        all = PlacementTable::build(f, live, caps, 1, countBand);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        cpu.push_back(cpuMs() - c0);
        peakMb = std::max(peakMb, statusMb("VmHWM:") - rssBefore);
        if (!all.fits()) return 1;  // the setup above always fits
      }
      std::vector<int> owned(static_cast<size_t>(nodes), 0);
      for (const auto& x : f) ++owned[all.ownersOf(x.fileId)[0]];
      const double share = static_cast<double>(files) / nodes;
      double spread = 0, fill = 0;
      for (int n = 0; n < nodes; ++n) {
        spread = std::max(spread, std::abs(owned[static_cast<size_t>(n)] - share) / share);
        fill = std::max(fill, static_cast<double>(all.ownedBytes(static_cast<uint32_t>(n))) /
                                  static_cast<double>(caps[static_cast<size_t>(n)]));
      }
      // Leaves: --leavers nodes spread over the ids, one at a time; the
      // others keep their capacities.
      std::vector<double> ratios;
      for (int l = 0; l < leavers; ++l) {
        const size_t gone = static_cast<size_t>(nodes - 1 - l * nodes / leavers);
        auto fewer = live;
        fewer.erase(fewer.begin() + static_cast<long>(gone));
        auto fewerCaps = caps;
        fewerCaps.erase(fewerCaps.begin() + static_cast<long>(gone));
        const auto after = PlacementTable::build(f, fewer, fewerCaps, 1, countBand);
        int moved = 0;
        for (const auto& x : f) moved += after.ownersOf(x.fileId)[0] != all.ownersOf(x.fileId)[0];
        ratios.push_back(static_cast<double>(moved) / owned[gone]);
      }
      const double leaveMean =
          ratios.empty() ? 0 : std::accumulate(ratios.begin(), ratios.end(), 0.0) / ratios.size();
      const double leaveMax = ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end());
      std::printf(
          "{\"files\":%d,\"nodes\":%d,\"ms\":%.1f,\"cpu_ms\":%.1f,\"min_ms\":%.1f,\"max_ms\":%.1f,"
          "\"peak_mb\":%.0f,\"min_files\":%d,\"max_files\":%d,\"count_spread\":%.4f,"
          "\"max_fill\":%.3f,\"count_band\":%.3f,\"leave_ratio\":%.3f,\"leave_ratio_max\":%.3f}\n",
          files, nodes, median(ms), median(cpu), *std::min_element(ms.begin(), ms.end()),
          *std::max_element(ms.begin(), ms.end()), peakMb,
          *std::min_element(owned.begin(), owned.end()),
          *std::max_element(owned.begin(), owned.end()), spread, fill, countBand, leaveMean,
          leaveMax);
      std::fflush(stdout);
    }
  }
  return 0;
}
