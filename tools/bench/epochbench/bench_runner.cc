#include "tools/bench/epochbench/bench_runner.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

#include "tools/bench/epochbench/daemon_probe.h"
#include "tools/bench/epochbench/mount_guard.h"
#include "tools/bench/epochbench/read_pass.h"
#include "tools/bench/epochbench/report.h"
#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;

// A tree the cases read: the source itself or a mount of it.
struct Tree {
  std::string root;
  std::vector<std::string> paths;  // absolute, one per dataset file
  std::optional<pid_t> daemon;     // serving process, if any
  bool primed = false;             // read completely at least once
  int warm_generation = -1;        // cache generation of its last complete read
};

class BenchRunner {
 public:
  explicit BenchRunner(const RunOptions& options) : options_(options) {}
  int run();

 private:
  void setUpCases();
  void setUpBindfs();
  void setUpEpochfs();
  Tree makeTree(const std::string& root, std::optional<pid_t> daemon) const;
  void skip(const std::string& name, const std::string& why);
  CaseResult* result(const std::string& name);
  PassResult readPass(Tree& tree);
  void prepare(CaseResult& c, Tree& tree);
  void timedPass(CaseResult& c, Tree& tree, int round);
  nlohmann::json configJson() const;

  const RunOptions& options_;
  std::string source_;
  std::vector<std::string> relative_paths_;
  std::mt19937_64 seeds_{std::random_device{}()};
  double load_before_ = 0;    // 1-minute load average when the passes began
  int cache_generation_ = 0;  // bumped by every drop of the kernel page cache
  std::vector<CaseResult> results_;
  std::unique_ptr<ScratchDir> scratch_;  // declared before the mounts: destroyed after them
  std::unique_ptr<MountGuard> bindfs_mount_;
  std::unique_ptr<MountGuard> epochfs_mount_;
  std::optional<Tree> native_, bindfs_, epochfs_;
};

Tree BenchRunner::makeTree(const std::string& root, std::optional<pid_t> daemon) const {
  Tree tree;
  tree.root = root;
  tree.daemon = daemon;
  for (const auto& rel : relative_paths_) tree.paths.push_back(root + "/" + rel);
  return tree;
}

CaseResult* BenchRunner::result(const std::string& name) {
  for (auto& c : results_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void BenchRunner::skip(const std::string& name, const std::string& why) {
  if (CaseResult* c = result(name)) {
    c->skipped = why;
    std::fprintf(stderr, "%s: skipped: %s\n", name.c_str(), why.c_str());
  }
}

void BenchRunner::setUpBindfs() {
  std::string bindfs = findExecutable("bindfs");
  if (bindfs.empty()) {
    return skip("bindfs", "bindfs is not installed; install it with: apt-get install bindfs");
  }
  std::string mnt = scratch_->makeSubdir("bindfs");
  std::string error;
  bindfs_mount_ = MountGuard::mount({bindfs, source_, mnt}, mnt, &error);
  if (!bindfs_mount_) return skip("bindfs", "mount failed: " + error);
  auto pid = findBindfsPid(mnt);
  if (!pid) result("bindfs")->note = "bindfs pid not found, no CPU figures";
  bindfs_.emplace(makeTree(mnt, pid));
  std::fprintf(stderr, "bindfs: mounted %s on %s (pid %d)\n", source_.c_str(), mnt.c_str(),
               pid.value_or(-1));
}

void BenchRunner::setUpEpochfs() {
  std::string epochfs = options_.epochfs.empty() ? selfExeDir() + "/epochfs" : options_.epochfs;
  const std::string wanted = epochfs;
  std::string why;
  if (epochfs = findExecutable(epochfs); epochfs.empty()) {
    why = "epochfs not found at " + wanted + " (build it: ninja -C build epochfs, or --epochfs)";
  } else {
    std::string mnt = scratch_->makeSubdir("epochfs");
    std::string error;
    epochfs_mount_ =
        MountGuard::mount({epochfs, source_, mnt, "--ram-cache", options_.ram_cache}, mnt, &error);
    if (!epochfs_mount_) {
      why = "mount failed: " + error;
    } else {
      auto pid = findEpochfsPid(mnt);
      epochfs_.emplace(makeTree(mnt, pid));
      std::fprintf(stderr, "epochfs: mounted %s on %s (pid %d)\n", source_.c_str(), mnt.c_str(),
                   pid.value_or(-1));
      for (const char* name : {"epochfs-ram", "epochfs-hot"}) {
        if (!pid && result(name)) result(name)->note = "epochfs pid not found, no CPU figures";
      }
    }
  }
  if (!why.empty()) {
    skip("epochfs-ram", why);
    skip("epochfs-hot", why);
  }
}

void BenchRunner::setUpCases() {
  for (const auto& name : options_.cases) {
    CaseResult c;
    c.name = name;
    c.has_daemon = name != "native";
    results_.push_back(std::move(c));
  }
  if (result("native")) native_.emplace(makeTree(source_, std::nullopt));
  if (result("bindfs")) setUpBindfs();
  if (result("epochfs-ram") || result("epochfs-hot")) setUpEpochfs();
  if (CaseResult* ram = result("epochfs-ram"); ram && ram->skipped.empty() && ::geteuid() != 0) {
    ram->note =
        "NOT dropped: not root, cannot drop the page cache (reads may not reach the daemon)";
    std::fprintf(stderr,
                 "epochfs-ram: not root, so the kernel page cache cannot be dropped; its figures "
                 "are marked (run as root for the real measurement)\n");
  }
}

PassResult BenchRunner::readPass(Tree& tree) {
  PassResult pass = runReadPass(tree.paths, options_.threads, seeds_());
  tree.primed = true;
  tree.warm_generation = cache_generation_;
  return pass;
}

// Brings `tree` into the state case `c` is measured in.
void BenchRunner::prepare(CaseResult& c, Tree& tree) {
  if (c.name == "epochfs-ram") {
    if (!tree.primed) readPass(tree);  // fills the daemon's RAM tier
    std::string error;
    if (::geteuid() == 0) {
      if (dropPageCache(&error)) {
        ++cache_generation_;
      } else if (c.note.empty()) {
        c.note = "NOT dropped: " + error;
      }
    }
  } else if (c.name == "epochfs-hot" || tree.warm_generation != cache_generation_) {
    readPass(tree);  // untimed warm-up
  }
}

void BenchRunner::timedPass(CaseResult& c, Tree& tree, int round) {
  prepare(c, tree);
  std::optional<double> cpu_before;
  if (tree.daemon) cpu_before = processCpuSeconds(*tree.daemon);
  PassResult pass = readPass(tree);
  if (cpu_before && pass.files > 0) {
    if (auto cpu_after = processCpuSeconds(*tree.daemon)) {
      c.daemon_cpu_s_per_1k.push_back((*cpu_after - *cpu_before) / pass.files * 1000);
    }
  }
  if (cleanupStarted()) return;  // a signal is unmounting everything; this pass is void
  std::fprintf(stderr, "  round %d/%d  %-12s %9.0f files/s %8.1f MB/s%s\n", round, options_.repeats,
               c.name.c_str(), pass.filesPerSecond(), pass.megabytesPerSecond(),
               pass.errors ? ("  " + std::to_string(pass.errors) + " errors").c_str() : "");
  c.passes.push_back(pass);
}

nlohmann::json BenchRunner::configJson() const {
  uint64_t bytes = 0;
  for (int i = 0; i < options_.spec.files; ++i) bytes += datasetFileBytes(options_.spec, i);
  utsname uts{};
  ::uname(&uts);
  return {{"dir", source_},
          {"files", options_.spec.files},
          {"classes", options_.spec.classes},
          {"mean_kb", options_.spec.mean_kb},
          {"seed", options_.spec.seed},
          {"dataset_bytes", bytes},
          {"threads", options_.threads},
          {"repeats", options_.repeats},
          {"cases", options_.cases},
          {"read_buffer_bytes", kReadBufferBytes},
          {"epochfs", options_.epochfs.empty() ? selfExeDir() + "/epochfs" : options_.epochfs},
          {"ram_cache", options_.ram_cache},
          {"can_drop_caches", ::geteuid() == 0},
          {"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"load_average_before", load_before_},
          {"kernel", uts.release}};
}

int BenchRunner::run() {
  ensureDataset(options_.dir, options_.spec);
  source_ = fs::canonical(options_.dir).string();
  relative_paths_ = datasetFiles(options_.spec);
  scratch_ = std::make_unique<ScratchDir>("/tmp/epochbench-mnt-");
  setUpCases();
  load_before_ = loadAverage();
  if (load_before_ > ::sysconf(_SC_NPROCESSORS_ONLN)) {
    std::fprintf(stderr, "warning: load average %.1f exceeds %ld CPUs; figures will be noisy\n",
                 load_before_, ::sysconf(_SC_NPROCESSORS_ONLN));
  }

  for (int round = 1; round <= options_.repeats; ++round) {
    for (auto& c : results_) {
      if (!c.skipped.empty()) continue;
      Tree* tree = c.name == "native" ? &*native_ : c.name == "bindfs" ? &*bindfs_ : &*epochfs_;
      timedPass(c, *tree, round);
    }
  }
  // Unmount before reporting so nothing is left behind whatever happens next.
  epochfs_mount_.reset();
  bindfs_mount_.reset();
  scratch_.reset();

  std::vector<Check> checks = doneWhenChecks(results_);
  std::FILE* table_out = options_.json ? stderr : stdout;
  std::fprintf(table_out, "\n%d files (%s), %d reader threads, %d timed passes per case\n",
               options_.spec.files, source_.c_str(), options_.threads, options_.repeats);
  printTable(table_out, results_);
  std::fprintf(table_out, "\n");
  printChecks(table_out, checks);
  if (options_.json) {
    std::printf("%s\n", toJson(configJson(), results_, checks).dump(2).c_str());
  }
  std::fflush(stdout);
  bool failed = false;
  for (const auto& c : checks) failed |= c.verdict() == "FAIL";
  return options_.strict && failed ? 1 : 0;
}

}  // namespace

int runBenchmark(const RunOptions& options) { return BenchRunner(options).run(); }

}  // namespace epochfs::bench
