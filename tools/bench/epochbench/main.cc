// epochbench: the project's benchmark. `gen` writes an ImageNet-shaped
// dataset; `run` measures epoch reads of it natively, through bindfs and
// through epochfs (see bench_runner.h); `prefetch` measures cold epochs with
// and without a registered order, and order-aware eviction (see
// prefetch_bench.h); `peers` puts epochfs beside native, bindfs and rclone
// (see peers_bench.h); `env` keeps the throttled benchmark source up for a
// script (see bench_env.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "tools/bench/epochbench/bench_env.h"
#include "tools/bench/epochbench/bench_runner.h"
#include "tools/bench/epochbench/dataset_generator.h"
#include "tools/bench/epochbench/mount_guard.h"
#include "tools/bench/epochbench/peers_bench.h"
#include "tools/bench/epochbench/prefetch_bench.h"

namespace {

using epochfs::bench::DatasetSpec;

void addDatasetOptions(CLI::App* cmd, DatasetSpec& spec) {
  cmd->add_option("--files", spec.files, "Number of files")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--classes", spec.classes, "Number of class directories")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mean-kb", spec.mean_kb, "Mean file size in KiB (log-normal, sigma 0.5)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", spec.seed, "Seed of sizes and contents")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  epochfs::bench::installSignalCleanup();

  CLI::App app{"epochbench: epoch-read benchmark for epochfs"};
  app.require_subcommand(1);

  std::string gen_dir;
  DatasetSpec gen_spec;
  CLI::App* gen = app.add_subcommand("gen", "Generate (or reuse) an ImageNet-shaped dataset");
  gen->add_option("DIR", gen_dir, "Dataset directory (manifest goes to DIR.manifest.json)")
      ->required();
  addDatasetOptions(gen, gen_spec);

  epochfs::bench::RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "Time shuffled whole-file reads: native, bindfs, epochfs-ram, epochfs-hot");
  run->add_option("--dir", run_options.dir, "Dataset directory (generated if missing)")
      ->capture_default_str();
  addDatasetOptions(run, run_options.spec);
  run->add_option("--threads", run_options.threads, "Reader threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  run->add_option("--repeats", run_options.repeats, "Timed passes per case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  run->add_option("--cases", run_options.cases, "Comma-separated cases, run in this order")
      ->delimiter(',')
      ->check(CLI::IsMember(epochfs::bench::kAllCases))
      ->capture_default_str();
  run->add_option("--epochfs", run_options.epochfs,
                  "epochfs binary (default: epochfs next to this executable)");
  run->add_option("--ram-cache", run_options.ram_cache, "epochfs --ram-cache size")
      ->capture_default_str();
  run->add_flag("--json", run_options.json, "Print a JSON document on stdout (table to stderr)");
  run->add_flag("--strict", run_options.strict, "Exit 1 if a done-when check fails");

  epochfs::bench::PrefetchBenchOptions pf;
  CLI::App* prefetch = app.add_subcommand(
      "prefetch",
      "Cold epochs: direct vs epochfs without (cold) and with a registered order (plan); "
      "order-aware vs LRU eviction (needs root)");
  prefetch->add_option("--dir", pf.dir, "Dataset directory without --source-throttle")
      ->capture_default_str();
  addDatasetOptions(prefetch, pf.spec);
  prefetch
      ->add_option("--eviction-files", pf.eviction_files,
                   "Files of the eviction case's dataset (0: --files)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  prefetch->add_option("--threads", pf.threads, "Reader threads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  prefetch->add_option("--deep-threads", pf.deep_threads, "Reader threads of the deep case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  prefetch
      ->add_option("--floor-readahead-files", pf.floor_readahead_files,
                   "Files the floor-*-ra cases keep WILLNEED issued ahead of the reads")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  prefetch->add_option("--repeats", pf.repeats, "Repeats of every case")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  prefetch->add_option("--compute-ms", pf.compute_ms, "Sleep per sample after reading it")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  prefetch->add_option("--source-throttle", pf.source_throttle,
                       "Cap source reads at BPS bytes/s (e.g. 100M = 100 MiB/s) on a "
                       "loop-mounted ext4 image");
  prefetch
      ->add_option("--cases", pf.cases,
                   "Comma-separated cases: direct, cold, plan, eviction; warm, deep (the direct "
                   "reader with --deep-threads: the device's ceiling), plan-aa (plan again: the "
                   "A/A pair) and floor-splice, floor-splice-ra, floor-copy-ra, floor-splice-hot "
                   "and their -dio forms (splice-floor, "
                   "no cache) and bindfs are diagnostics")
      ->delimiter(',')
      ->check(CLI::IsMember(epochfs::bench::kPrefetchCases))
      ->capture_default_str();
  prefetch->add_option("--order-seed", pf.order_seed, "Repeat r shuffles with SEED + r")
      ->capture_default_str();
  prefetch->add_option("--epochfs", pf.epochfs,
                       "epochfs binary (default: epochfs next to this executable)");
  prefetch->add_option("--ram-cache", pf.ram_cache,
                       "epochfs --ram-cache of the epoch cases (default: dataset x 1.25 + 64M)");
  prefetch->add_option("--epochfs-arg", pf.epochfs_args,
                       "Extra epochfs argument, repeatable (--epochfs-arg=--prefetch-window=1024)");
  prefetch->add_flag("--json", pf.json, "Print a JSON document on stdout (tables to stderr)");

  epochfs::bench::PeersBenchOptions peers_options;
  CLI::App* peers = app.add_subcommand(
      "peers",
      "native, bindfs, rclone (vfs full cache) and epochfs side by side: files/s and daemon "
      "CPU for ~110 KB files, MB/s for shard files, T readers, cold and warm (needs root)");
  peers
      ->add_option("--dir", peers_options.dir, "Source: holds files/ and shards/ (made if missing)")
      ->capture_default_str();
  addDatasetOptions(peers, peers_options.spec);
  peers->add_option("--shards", peers_options.shards, "Shard files")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  peers->add_option("--shard-mb", peers_options.shard_mb, "MiB per shard file")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  peers->add_option("--threads", peers_options.threads, "Comma-separated reader thread counts")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  peers->add_option("--repeats", peers_options.repeats, "Repeats (filesystem order rotates)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  peers->add_option("--fs", peers_options.filesystems, "Comma-separated filesystems")
      ->delimiter(',')
      ->check(CLI::IsMember(epochfs::bench::kPeerFilesystems))
      ->capture_default_str();
  peers->add_option("--epochfs", peers_options.epochfs,
                    "epochfs binary (default: epochfs next to this executable)");
  peers->add_option("--ram-cache", peers_options.ram_cache,
                    "epochfs --ram-cache (default: files + shards x 1.25 + 256M)");
  peers->add_option("--json", peers_options.json_path, "Also write the results as JSON to FILE");

  epochfs::bench::EnvOptions env_options;
  CLI::App* env = app.add_subcommand(
      "env",
      "Keep the benchmark environment up: DIR copied onto a loop-mounted ext4 source whose reads "
      "are capped for its cgroup's members; commands on stdin, JSON replies on stdout (needs "
      "root)");
  env->add_option("--data", env_options.data, "Dataset directory to copy onto the source")
      ->required();
  env->add_option("--rate", env_options.read_bps,
                  "Read cap of the cgroup's members, bytes/s (e.g. 100M = 100 MiB/s)")
      ->required();
  env->add_option("--subdir", env_options.subdir, "The copy's directory under the source's root")
      ->capture_default_str();
  env->add_option("--epochfs", env_options.epochfs,
                  "epochfs binary of `mount epochfs` (default: epochfs next to this executable)");
  env->add_option("--room", env_options.room,
                  "Free space to leave on the source for files written there later (e.g. 1G)")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  try {
    if (*gen) {
      epochfs::bench::ensureDataset(gen_dir, gen_spec);
      return 0;
    }
    if (*prefetch) return epochfs::bench::runPrefetchBenchmark(pf);
    if (*peers) return epochfs::bench::runPeersBenchmark(peers_options);
    if (*env) return epochfs::bench::runBenchEnv(env_options);
    return epochfs::bench::runBenchmark(run_options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epochbench: %s\n", e.what());
    return 1;
  }
}
