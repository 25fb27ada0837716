#include "tools/bench/epochbench/prefetch_bench.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "fusefs/admin_protocol.h"
#include "tools/bench/epochbench/epochfs_mount.h"
#include "tools/bench/epochbench/mount_guard.h"
#include "tools/bench/epochbench/prefetch_report.h"
#include "tools/bench/epochbench/read_pass.h"
#include "tools/bench/epochbench/report.h"
#include "tools/bench/epochbench/stats_sampler.h"
#include "tools/bench/epochbench/system_util.h"
#include "tools/bench/epochbench/throttled_source.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Dataset {
  DatasetSpec spec;
  std::string root;                // absolute source directory
  std::vector<std::string> files;  // relative paths in index order
  uint64_t bytes = 0;
};

uint64_t specBytes(const DatasetSpec& spec) {
  uint64_t bytes = 0;
  for (int i = 0; i < spec.files; ++i) bytes += datasetFileBytes(spec, i);
  return bytes;
}

class PrefetchBench {
 public:
  explicit PrefetchBench(const PrefetchBenchOptions& options) : options_(options) {}
  int run();

 private:
  bool wants(const std::string& c) const {
    return std::find(options_.cases.begin(), options_.cases.end(), c) != options_.cases.end();
  }
  std::chrono::microseconds computeStep() const {
    return std::chrono::microseconds(std::lround(options_.compute_ms * 1000));
  }
  void setUpSources();
  Dataset prepareDataset(const DatasetSpec& spec, const std::string& root);
  void dropCaches();
  BlkioThrottle* throttle() { return source_ ? &source_->throttle() : nullptr; }
  std::optional<uint64_t> deviceBytes() { return source_ ? throttle()->readBytes() : std::nullopt; }
  std::vector<std::string> absolute(const std::string& root, const std::vector<std::string>& rel);
  void scan(const std::string& root, const Dataset& d);
  std::unique_ptr<EpochfsMount> mount(const Dataset& d, const std::string& ram_cache);
  std::vector<std::string> inOrder(const Dataset& d, uint64_t seed);
  EpochRun runDirect(int repeat, const std::vector<std::string>& order, int threads);
  EpochRun runEpochfs(int repeat, const std::vector<std::string>& order, bool plan, bool warm);
  EpochRun runFloor(int repeat, const std::vector<std::string>& order, const std::string& name);
  void runEviction(int repeat);
  json configJson() const;

  const PrefetchBenchOptions& options_;
  std::string epochfs_;
  uint64_t read_bps_ = 0;
  std::unique_ptr<ThrottledSource> source_;
  std::string source_description_;  // of source_, kept for the report
  std::unique_ptr<ScratchDir> scratch_;
  Dataset main_, evict_;
  PrefetchResults results_;
};

Dataset PrefetchBench::prepareDataset(const DatasetSpec& spec, const std::string& root) {
  ensureDataset(root, spec);
  Dataset d;
  d.spec = spec;
  d.root = fs::canonical(root).string();
  d.files = datasetFiles(spec);
  d.bytes = specBytes(spec);
  return d;
}

void PrefetchBench::setUpSources() {
  DatasetSpec evict_spec = options_.spec;
  if (options_.eviction_files > 0) evict_spec.files = options_.eviction_files;
  evict_spec.classes = std::min(evict_spec.classes, evict_spec.files);
  const bool same = evict_spec.files == options_.spec.files;
  const bool need_main = std::any_of(options_.cases.begin(), options_.cases.end(),
                                     [](const std::string& c) { return c != "eviction"; });
  const bool need_evict = wants("eviction");
  const bool separate_evict = need_evict && !(same && need_main);
  if (read_bps_ > 0) {
    std::vector<const DatasetSpec*> on_image;
    if (need_main) on_image.push_back(&options_.spec);
    if (separate_evict) on_image.push_back(&evict_spec);
    // Room for the data x 1.3, a 4 KiB block per file, the journal and metadata.
    uint64_t bytes = 128ull << 20, inodes = 4096;
    for (const DatasetSpec* spec : on_image) {
      bytes += specBytes(*spec) * 13 / 10 + uint64_t(spec->files) * 4096;
      inodes += uint64_t(spec->files) * 11 / 10 + spec->classes;
    }
    source_ = ThrottledSource::create(bytes, inodes, read_bps_);
    source_description_ = source_->describe();
    auto dir = [&](const DatasetSpec& s) {
      return source_->root() + "/data-" + std::to_string(s.files);
    };
    if (need_main) main_ = prepareDataset(options_.spec, dir(options_.spec));
    if (need_evict) evict_ = separate_evict ? prepareDataset(evict_spec, dir(evict_spec)) : main_;
  } else {
    if (need_main) main_ = prepareDataset(options_.spec, options_.dir);
    std::string evict_dir =
        same ? options_.dir : options_.dir + "-" + std::to_string(evict_spec.files) + "files";
    if (need_evict) evict_ = separate_evict ? prepareDataset(evict_spec, evict_dir) : main_;
  }
}

void PrefetchBench::dropCaches() {
  std::string error;
  if (!dropPageCache(&error, 3)) throw std::runtime_error(error);
}

std::vector<std::string> PrefetchBench::absolute(const std::string& root,
                                                 const std::vector<std::string>& rel) {
  std::vector<std::string> out;
  out.reserve(rel.size());
  for (const auto& r : rel) out.push_back(root + "/" + r);
  return out;
}

std::vector<std::string> PrefetchBench::inOrder(const Dataset& d, uint64_t seed) {
  std::vector<std::string> order;
  order.reserve(d.files.size());
  for (uint32_t i : shuffledOrder(d.files.size(), seed)) order.push_back(d.files[i]);
  return order;
}

void PrefetchBench::scan(const std::string& root, const Dataset& d) {
  ScanResult s = scanTree(root);
  if (s.errors > 0 || s.files != d.spec.files) {
    std::fprintf(stderr, "warning: scan of %s found %lld files (expected %d), %lld errors\n",
                 root.c_str(), static_cast<long long>(s.files), d.spec.files,
                 static_cast<long long>(s.errors));
  }
}

std::unique_ptr<EpochfsMount> PrefetchBench::mount(const Dataset& d, const std::string& ram_cache) {
  std::vector<std::string> args = {"--ram-cache", ram_cache};
  args.insert(args.end(), options_.epochfs_args.begin(), options_.epochfs_args.end());
  std::string error;
  auto m = EpochfsMount::start(epochfs_, d.root, *scratch_, args, throttle(), &error);
  if (!m) throw std::runtime_error("epochfs mount of " + d.root + ": " + error);
  return m;
}

EpochRun PrefetchBench::runDirect(int repeat, const std::vector<std::string>& order, int threads) {
  dropCaches();
  scan(main_.root, main_);
  EpochRun run;
  run.repeat = repeat;
  std::string error;
  // The readers are this process's threads: it joins the throttled cgroup for the epoch.
  if (throttle() && !throttle()->addProcess(::getpid(), &error)) throw std::runtime_error(error);
  auto dev0 = deviceBytes();
  auto busy0 = systemCpuTimes();
  run.pass = runOrderedPass(absolute(main_.root, order), threads, computeStep());
  run.cpu_busy = busyFraction(busy0, systemCpuTimes());
  auto dev1 = deviceBytes();
  if (throttle() && !throttle()->removeProcess(::getpid(), &error)) throw std::runtime_error(error);
  if (dev0 && dev1) run.device_bytes = *dev1 - *dev0;
  return run;
}

EpochRun PrefetchBench::runEpochfs(int repeat, const std::vector<std::string>& order, bool plan,
                                   bool warm) {
  dropCaches();
  std::string ram = options_.ram_cache.empty() ? std::to_string(main_.bytes * 5 / 4 + (64ull << 20))
                                               : options_.ram_cache;
  auto m = mount(main_, ram);
  scan(m->mountpoint(), main_);
  if (warm) {  // everything into the RAM tier, then only the kernel's cache dropped
    runOrderedPass(absolute(m->mountpoint(), main_.files), options_.threads);
    dropCaches();
  }
  EpochRun run;
  run.repeat = repeat;
  std::string error;
  auto before = m->stats(&error);
  auto cpu0 = processCpuSeconds(m->pid());
  auto dev0 = deviceBytes();
  auto paths = absolute(m->mountpoint(), order);

  const auto t0 = Clock::now();  // a plan's epoch starts when its registration does
  if (plan) {
    auto n = m->registerOrder(repeat, order, &error);
    if (!n || *n != order.size()) {
      throw std::runtime_error("registering the order failed: " +
                               (n ? "committed " + std::to_string(*n) + " entries" : error));
    }
    run.register_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  StatsSampler sampler(*m, t0);
  auto busy0 = systemCpuTimes();
  run.pass = runOrderedPass(paths, options_.threads, computeStep(), t0);
  run.cpu_busy = busyFraction(busy0, systemCpuTimes());
  sampler.stop();
  auto after = m->stats(&error);
  auto cpu1 = processCpuSeconds(m->pid());
  auto dev1 = deviceBytes();
  if (before && after) {
    run.source_bytes = statsDelta(*before, *after, admin::kStatsSourceReadBytes);
    run.stalls = streamSum(*after, admin::kStatsStreamStalls);
    run.hits = streamSum(*after, admin::kStatsStreamHits);
    run.prefetched_files = streamSum(*after, admin::kStatsStreamPrefetchedFiles);
    run.pushed_files = statsDelta(*before, *after, admin::kStatsPrefetchPushedFiles);
    run.daemon_reads = statsDelta(*before, *after, admin::kStatsReadRequests);
  } else {
    std::fprintf(stderr, "warning: stats unavailable: %s\n", error.c_str());
  }
  if (cpu0 && cpu1) run.daemon_cpu_s = *cpu1 - *cpu0;
  if (dev0 && dev1) run.device_bytes = *dev1 - *dev0;
  run.samples = sampler.samples();
  if (plan) run.lead_files = sampler.medianLead();
  return run;
}

// splice-floor (or bindfs -o ro) over the source: a FUSE daemon with no cache.
// The case's name says how splice-floor runs: "floor-copy" replies from a
// reused buffer, "-ra" gives it the order, "-dio" opens with DIRECT_IO, and
// "floor-splice-hot" reads the source whole first (untimed), so every reply
// splices pages already in memory: splicing's own ceiling.
EpochRun PrefetchBench::runFloor(int repeat, const std::vector<std::string>& order,
                                 const std::string& name) {
  auto endsWith = [](const std::string& s, const std::string& tail) {
    return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  const std::string binary =
      name == "bindfs" ? findExecutable("bindfs") : selfExeDir() + "/splice-floor";
  if (findExecutable(binary).empty()) throw std::runtime_error(name + ": no " + binary);
  dropCaches();
  if (name.rfind("floor-splice-hot", 0) == 0) {
    runOrderedPass(absolute(main_.root, order), options_.deep_threads);
  }
  static int serial = 0;
  const std::string mnt = scratch_->makeSubdir("floor-" + std::to_string(++serial));
  std::vector<std::string> command = {binary, "-o", "ro", main_.root, mnt};
  std::string order_file;
  if (name != "bindfs") {
    command = {binary, main_.root, mnt, "--reply",
               name.rfind("floor-copy", 0) == 0 ? "copy" : "splice"};
    if (endsWith(name, "-dio")) command.push_back("--direct-io");
    if (endsWith(name, "-ra") || endsWith(name, "-ra-dio")) {
      order_file = "/tmp/epochbench-floor-order-" + std::to_string(::getpid());
      std::FILE* f = std::fopen(order_file.c_str(), "w");
      if (f == nullptr) throw std::runtime_error("cannot write " + order_file);
      for (const auto& rel : order) std::fprintf(f, "%s\n", rel.c_str());
      std::fclose(f);
      command.insert(command.end(), {"--order", order_file, "--readahead-files",
                                     std::to_string(options_.floor_readahead_files)});
    }
  }
  std::string error;
  auto guard = MountGuard::mount(command, mnt, &error);
  if (!order_file.empty()) ::unlink(order_file.c_str());  // read at its start
  if (!guard) throw std::runtime_error(command.front() + " mount: " + error);
  auto pid = findProcessByMount(fs::path(command.front()).filename().string(), mnt);
  if (throttle() && pid && !throttle()->addProcess(*pid, &error)) throw std::runtime_error(error);
  scan(mnt, main_);
  EpochRun run;
  run.repeat = repeat;
  auto cpu0 = pid ? processCpuSeconds(*pid) : std::nullopt;
  auto dev0 = deviceBytes();
  auto busy0 = systemCpuTimes();
  run.pass = runOrderedPass(absolute(mnt, order), options_.threads, computeStep());
  run.cpu_busy = busyFraction(busy0, systemCpuTimes());
  auto cpu1 = pid ? processCpuSeconds(*pid) : std::nullopt;
  auto dev1 = deviceBytes();
  if (cpu0 && cpu1) run.daemon_cpu_s = *cpu1 - *cpu0;
  if (dev0 && dev1) run.device_bytes = *dev1 - *dev0;
  guard.reset();
  if (pid) waitForExit(*pid, 15);
  std::error_code ec;
  fs::remove(mnt, ec);
  return run;
}

void PrefetchBench::runEviction(int repeat) {
  const std::vector<std::string> modes = repeat % 2
                                             ? std::vector<std::string>{"lru", "order-aware"}
                                             : std::vector<std::string>{"order-aware", "lru"};
  for (const auto& mode : modes) {
    EvictionMode* out = nullptr;
    for (auto& m : results_.eviction) out = m.name == mode ? &m : out;
    dropCaches();
    auto m = mount(evict_, std::to_string(results_.eviction_ram_bytes));
    scan(m->mountpoint(), evict_);
    for (int epoch = 1; epoch <= kEvictionEpochs; ++epoch) {
      auto order = inOrder(evict_, options_.order_seed + 1000 * repeat + epoch);
      dropCaches();
      std::string error;
      auto rchar0 = processReadChars(m->pid());
      auto before = m->stats(&error);
      auto dev0 = deviceBytes();
      if (mode == "order-aware") {
        auto n = m->registerOrder(epoch, order, &error);
        if (!n) throw std::runtime_error("registering the order failed: " + error);
      }
      EvictionEpoch e;
      e.repeat = repeat;
      e.epoch = epoch;
      e.pass = runOrderedPass(absolute(m->mountpoint(), order), options_.threads, computeStep());
      auto rchar1 = processReadChars(m->pid());
      auto after = m->stats(&error);
      auto dev1 = deviceBytes();
      if (!rchar0 || !rchar1 || !before || !after) {
        throw std::runtime_error("eviction: cannot read the daemon's counters: " + error);
      }
      const double total = static_cast<double>(evict_.bytes);
      e.rchar_bytes = *rchar1 - *rchar0;
      e.daemon_bytes = statsDelta(*before, *after, admin::kStatsSourceReadBytes);
      e.rchar_fraction = e.rchar_bytes / total;
      e.daemon_fraction = e.daemon_bytes / total;
      if (dev0 && dev1) e.device_fraction = (*dev1 - *dev0) / total;
      printEvictionProgress(stderr, mode, e);
      out->epochs.push_back(e);
    }
  }
}

json PrefetchBench::configJson() const {
  utsname uts{};
  ::uname(&uts);
  json config = {{"files", options_.spec.files},
                 {"classes", options_.spec.classes},
                 {"mean_kb", options_.spec.mean_kb},
                 {"seed", options_.spec.seed},
                 {"threads", options_.threads},
                 {"deep_threads", options_.deep_threads},
                 {"floor_readahead_files", options_.floor_readahead_files},
                 {"repeats", options_.repeats},
                 {"compute_ms", options_.compute_ms},
                 {"cases", options_.cases},
                 {"order_seed", options_.order_seed},
                 {"read_buffer_bytes", kReadBufferBytes},
                 {"epochfs", epochfs_},
                 {"epochfs_args", options_.epochfs_args},
                 {"ram_cache", options_.ram_cache.empty() ? "auto" : options_.ram_cache},
                 {"source_throttle_bps", read_bps_},
                 {"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
                 {"load_average_before", loadAverage()},
                 {"kernel", uts.release}};
  if (source_) config["throttled_source"] = source_description_;
  if (!main_.root.empty()) {
    config["dataset_dir"] = main_.root;
    config["dataset_bytes"] = main_.bytes;
  }
  if (results_.eviction_run) {
    config["eviction_files"] = evict_.spec.files;
    config["eviction_dataset_dir"] = evict_.root;
    config["eviction_dataset_bytes"] = evict_.bytes;
  }
  return config;
}

int PrefetchBench::run() {
  if (::geteuid() != 0) throw std::runtime_error("prefetch needs root: it drops the page cache");
  if (!options_.source_throttle.empty()) {
    auto bps = parseByteSize(options_.source_throttle);
    if (!bps || *bps == 0)
      throw std::runtime_error("bad --source-throttle " + options_.source_throttle);
    read_bps_ = *bps;
  }
  epochfs_ =
      findExecutable(options_.epochfs.empty() ? selfExeDir() + "/epochfs" : options_.epochfs);
  if (epochfs_.empty()) throw std::runtime_error("epochfs binary not found (use --epochfs)");
  setUpSources();
  scratch_ = std::make_unique<ScratchDir>("/tmp/epochbench-prefetch-");
  results_.throttled = read_bps_ > 0;
  results_.compute_ms = options_.compute_ms;
  results_.compute_only_s = main_.spec.files * options_.compute_ms / 1000.0 / options_.threads;
  std::vector<std::string> epoch_cases;
  for (const auto& c : options_.cases) {
    if (c != "eviction") epoch_cases.push_back(c);
  }
  // The floor of a compute-bound epoch on this machine: the sleeps alone.
  if (!epoch_cases.empty() && options_.compute_ms > 0) epoch_cases.push_back(kSleepOnly);
  for (const auto& c : epoch_cases) results_.cases.push_back({c, {}});
  if (wants("eviction")) {
    results_.eviction_run = true;
    results_.eviction_dataset_bytes = evict_.bytes;
    results_.eviction_ram_bytes = evict_.bytes / 2;
    results_.eviction = {{"lru", {}}, {"order-aware", {}}};
  }
  results_.config = configJson();

  for (int repeat = 1; repeat <= options_.repeats && !cleanupStarted(); ++repeat) {
    std::vector<std::string> order;
    if (!epoch_cases.empty()) order = inOrder(main_, options_.order_seed + repeat);
    for (size_t k = 0; k < epoch_cases.size(); ++k) {
      // Rotated per repeat, so no case always runs first after the dataset was written.
      const std::string& name = epoch_cases[(k + repeat - 1) % epoch_cases.size()];
      EpochRun run;
      if (name == kSleepOnly) {
        run.repeat = repeat;
        run.pass = runComputeOnlyPass(order.size(), options_.threads, computeStep());
      } else if (name == "direct") {
        run = runDirect(repeat, order, options_.threads);
      } else if (name == "deep") {
        run = runDirect(repeat, order, options_.deep_threads);
      } else if (name.rfind("floor-", 0) == 0 || name == "bindfs") {
        run = runFloor(repeat, order, name);
      } else {
        run = runEpochfs(repeat, order, name == "plan" || name == "plan-aa", name == "warm");
      }
      printEpochProgress(stderr, name, run, options_.repeats);
      for (auto& c : results_.cases) {
        if (c.name == name) c.runs.push_back(std::move(run));
      }
    }
    if (wants("eviction")) runEviction(repeat);
  }
  scratch_.reset();
  source_.reset();  // unmount, detach, remove before reporting

  auto targets = prefetchTargets(results_);
  std::FILE* table_out = options_.json ? stderr : stdout;
  results_.config["load_average_after"] = loadAverage();
  printPrefetchReport(table_out, results_, targets);
  if (options_.json) std::printf("%s\n", prefetchJson(results_, targets).dump(2).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int runPrefetchBenchmark(const PrefetchBenchOptions& options) {
  return PrefetchBench(options).run();
}

}  // namespace epochfs::bench
