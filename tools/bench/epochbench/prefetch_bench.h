// `epochbench prefetch`: what a registered epoch order buys on a cold cache.
//
// Epoch cases, interleaved within each repeat (rotated so none always goes
// first), every one on a freshly dropped page cache (echo 3 > drop_caches),
// with the same shuffled order (seeded per repeat) and T reader threads that
// read each sample whole and then sleep --compute-ms (the training step):
//   direct  the source read directly;
//   cold    a fresh epochfs mount (empty RAM tier, no disk tier), no plan;
//   plan    the same, with the epoch's order registered over the admin socket;
//           timed from the moment registration starts;
//   warm    (diagnostic, not by default) a fresh mount whose RAM tier holds the
//           whole dataset (read once, untimed) before the kernel's cache is
//           dropped: the best epochfs can do when nothing waits on the source.
//   plan-aa (diagnostic) plan again, the same binary: the A/A pair that says
//           how far two runs of one binary differ in this session.
//   floor-splice, floor-splice-ra, floor-copy-ra (diagnostics) the floor under
//           the cold path: splice-floor (tools/bench/splice-floor, beside this
//           executable) mounted over the source, with no cache at all; replies
//           by splice from the source fd, or from one reused buffer per
//           thread (copy); "-ra": the epoch's order given to it, which keeps
//           POSIX_FADV_WILLNEED issued --floor-readahead-files ahead;
//           floor-splice-hot: the source read whole first (untimed), so every
//           reply splices pages already in memory (the ceiling of splicing);
//           "-dio": every open FOPEN_DIRECT_IO (the reply lands in the
//           reader's buffer, no FUSE page-cache page is filled).
//   bindfs  (diagnostic) bindfs -o ro over the source, default options.
// Before each epoch an untimed ImageFolder-style scan (readdir + stat of every
// entry) runs on the tree about to be read. With --compute-ms > 0 a
// "sleep-only" row (the compute steps alone, no reads) shows the floor this
// machine puts under the ideal compute-only time (files x compute-ms / T).
// Wait fractions are prefetch.streams[] stalls / (stalls + hits), counted per
// FUSE read request of a planned file.
//
//   eviction  a dataset twice the RAM tier (--ram-cache = dataset/2), three
//             shuffled epochs on one mount, page cache dropped before each,
//             once without orders (LRU) and once registering each epoch's
//             order at its start (order-aware). Source bytes per epoch are
//             measured outside the daemon (its /proc/PID/io rchar) beside its
//             own tiers.source.read_bytes.
//
// --source-throttle BPS puts the source on a loop-mounted ext4 image whose
// reads are capped by the kernel block-I/O controller for the reading process
// (see throttled_source.h); without it the source is a plain directory.
// Needs root (drop_caches; loop devices and cgroups for the throttle).
#pragma once

#include <string>
#include <vector>

#include "tools/bench/epochbench/dataset_generator.h"

namespace epochfs::bench {

// All cases; "warm" and "deep" are diagnostics and not run by default. "deep"
// is the direct reader with --deep-threads threads: about what the source
// device delivers at all (a deep queue), so about the ceiling of a cold epoch.
inline const std::vector<std::string> kPrefetchCases = {"direct",
                                                        "cold",
                                                        "plan",
                                                        "warm",
                                                        "deep",
                                                        "plan-aa",
                                                        "floor-splice",
                                                        "floor-splice-ra",
                                                        "floor-copy-ra",
                                                        "floor-splice-hot",
                                                        "floor-splice-dio",
                                                        "floor-splice-ra-dio",
                                                        "floor-splice-hot-dio",
                                                        "bindfs",
                                                        "eviction"};

struct PrefetchBenchOptions {
  std::string dir = "/tmp/epochbench-prefetch-data";  // plain-source dataset
  DatasetSpec spec;                                   // --files etc.
  int eviction_files = 4000;                          // 0: same as --files
  int threads = 2;
  int deep_threads = 16;           // readers of the "deep" case
  int floor_readahead_files = 64;  // the floor-*-ra cases' WILLNEED depth
  int repeats = 3;
  double compute_ms = 4;
  std::string source_throttle;  // "" (plain directory) or a rate like "100M" (B/s, 1024-based)
  std::vector<std::string> cases = {"direct", "cold", "plan", "eviction"};
  uint64_t order_seed = 1000;             // repeat r shuffles with order_seed + r
  std::string epochfs;                    // empty: dirname(/proc/self/exe)/epochfs
  std::string ram_cache;                  // epoch cases; empty: dataset x 1.25 + 64 MiB
  std::vector<std::string> epochfs_args;  // extra daemon arguments
  bool json = false;                      // JSON on stdout, tables on stderr
};

// Runs it; returns the process exit code. Throws std::runtime_error on setup
// failures (after undoing what was set up).
int runPrefetchBenchmark(const PrefetchBenchOptions& options);

}  // namespace epochfs::bench
