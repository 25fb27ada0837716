// `epochbench peers`: epochfs side by side with what users mount instead, in
// one invocation. Filesystems over one source directory:
//   native   the source directory itself;
//   bindfs   `bindfs -o ro SRC MNT` (a pass-through FUSE filesystem);
//   rclone   `rclone mount SRC MNT --read-only --vfs-cache-mode full` (a caching
//            FUSE filesystem; its cache directory in the benchmark's scratch dir);
//   epochfs  `epochfs SRC MNT --ram-cache SIZE`.
// Workloads, each with T reader threads for every T of --threads:
//   files   a shuffled whole-file read of the ImageNet-shaped files (~110 KB);
//           files/s and the daemon's CPU seconds per 1,000 files;
//   shards  large shard files read sequentially (whole, 1 MiB reads), one
//           reader per shard at a time; MB/s.
// States: cold = page cache dropped (echo 3), fresh mount, empty caches;
// warm = the second pass on the same mount with the page cache dropped again,
// so what the filesystem keeps itself (rclone's disk cache, epochfs's RAM
// tier) serves it; native and bindfs keep nothing, so their warm = cold.
// For each repeat, each filesystem and each T: mount; cold files, cold shards;
// drop; warm files, warm shards; unmount. The filesystem order rotates with the
// repeat. Daemon CPU = utime + stime from /proc/PID/stat of the serving
// process (for epochfs the worker, plus its supervisor when supervised).
// Needs root (drop_caches, mounts).
#pragma once

#include <string>
#include <vector>

#include "tools/bench/epochbench/dataset_generator.h"

namespace epochfs::bench {

inline const std::vector<std::string> kPeerFilesystems = {"native", "bindfs", "rclone", "epochfs"};

struct PeersBenchOptions {
  // Holds files/ (the ImageNet-shaped dataset) and shards/ (random shard files).
  std::string dir = "/var/tmp/epochbench-peers";
  DatasetSpec spec{.files = 2000, .classes = 20};
  int shards = 4;      // shard files; as many as the largest T keeps every reader busy
  int shard_mb = 512;  // MiB each
  std::vector<int> threads = {1, 2, 4};
  int repeats = 3;
  std::vector<std::string> filesystems = kPeerFilesystems;
  std::string epochfs;    // empty: dirname(/proc/self/exe)/epochfs
  std::string ram_cache;  // empty: (files + shards) x 1.25 + 256 MiB
  std::string json_path;  // write the JSON document here ("" = none)
};

// Runs the matrix; returns the process exit code (1 if a pass had read errors).
// Throws std::runtime_error on setup failures.
int runPeersBenchmark(const PeersBenchOptions& options);

}  // namespace epochfs::bench
