// placement-bench: how long PlacementTable::build takes (the bounded-load
// placement every node computes on each live-set change, on the placement
// builder's thread). Files of ~110 KB with random ids, equal capacities of
// 4/3 of each node's share; median of --repeats builds per case.
//
// Prints one JSON line per case: {"files":F,"nodes":N,"ms":median,"min_ms":m,"max_ms":M,
// "min_files":a,"max_files":b,"leave_moved":x}: the fewest and most files a
// node owns, and the fraction of the staying nodes' files whose owner changes
// when the last node leaves (plain rendezvous: 0).
//
//   placement-bench [--files 2000,100000,1000000] [--nodes 4,8,64] [--repeats 3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "transport/placement_table.h"

using namespace epochfs::transport;

int main(int argc, char** argv) {
  std::vector<int> fileCounts = {2000, 100000, 1000000}, nodeCounts = {4, 8, 64};
  int repeats = 3;
  CLI::App app{"placement-bench: time of one PlacementTable::build", "placement-bench"};
  app.add_option("--files", fileCounts, "File counts")->delimiter(',');
  app.add_option("--nodes", nodeCounts, "Node counts")->delimiter(',');
  app.add_option("--repeats", repeats, "Builds per case (the median is printed)")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  for (int files : fileCounts) {
    std::mt19937_64 rng(1);
    std::vector<FileBytes> f;
    uint64_t d = 0;
    for (int i = 0; i < files; ++i) {
      f.push_back({rng(), 110000});
      d += 110000;
    }
    for (int nodes : nodeCounts) {
      std::vector<Candidate> live;
      std::vector<uint64_t> caps;
      for (int n = 0; n < nodes; ++n) {
        live.push_back({static_cast<uint32_t>(n), 1.0});
        caps.push_back(d / nodes * 4 / 3);
      }
      std::vector<double> ms;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto t = PlacementTable::build(f, live, caps, 1);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        if (!t.fits()) return 1;  // the setup above always fits
      }
      std::sort(ms.begin(), ms.end());
      const auto all = PlacementTable::build(f, live, caps, 1);
      std::vector<int> owned(nodes, 0);
      for (const auto& x : f) ++owned[all.ownersOf(x.fileId)[0]];
      // The last node leaves; the others keep their capacities.
      auto fewer = live;
      fewer.pop_back();
      auto fewerCaps = caps;
      fewerCaps.pop_back();
      const auto after = PlacementTable::build(f, fewer, fewerCaps, 1);
      int staying = 0, moved = 0;
      for (const auto& x : f) {
        const uint32_t before = all.ownersOf(x.fileId)[0];
        if (before == static_cast<uint32_t>(nodes - 1)) continue;
        ++staying;
        moved += after.ownersOf(x.fileId)[0] != before;
      }
      std::printf(
          "{\"files\":%d,\"nodes\":%d,\"ms\":%.1f,\"min_ms\":%.1f,\"max_ms\":%.1f,"
          "\"min_files\":%d,\"max_files\":%d,\"leave_moved\":%.4f}\n",
          files, nodes, ms[ms.size() / 2], ms.front(), ms.back(),
          *std::min_element(owned.begin(), owned.end()),
          *std::max_element(owned.begin(), owned.end()),
          staying > 0 ? static_cast<double>(moved) / staying : 0.0);
    }
  }
  return 0;
}
