#include "tools/bench/epochbench/peers_bench.h"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>

#include "tools/bench/epochbench/case_mount.h"
#include "tools/bench/epochbench/daemon_probe.h"
#include "tools/bench/epochbench/mount_guard.h"
#include "tools/bench/epochbench/read_pass.h"
#include "tools/bench/epochbench/report.h"
#include "tools/bench/epochbench/system_util.h"

namespace epochfs::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string> kWorkloads = {"files", "shards"};
const std::vector<std::string> kStates = {"cold", "warm"};

// Writes `count` shard files of `mib` MiB of pseudo-random bytes under
// `dir`, keeping those already there with the right size.
std::vector<std::string> ensureShards(const std::string& dir, int count, int mib) {
  fs::create_directories(dir);
  const uint64_t bytes = static_cast<uint64_t>(mib) << 20;
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%06d.bin", i);
    names.push_back(name);
    std::string path = dir + "/" + name;
    std::error_code ec;
    if (fs::file_size(path, ec) == bytes && !ec) continue;
    std::fprintf(stderr, "peers: writing %s (%d MiB)\n", path.c_str(), mib);
    std::ofstream out(path + ".tmp", std::ios::binary | std::ios::trunc);
    std::mt19937_64 rng(0x5eed0000u + static_cast<uint64_t>(i));
    std::vector<uint64_t> block((1 << 20) / sizeof(uint64_t));
    for (uint64_t done = 0; done < bytes && out; done += 1 << 20) {
      for (auto& w : block) w = rng();
      out.write(reinterpret_cast<const char*>(block.data()), 1 << 20);
    }
    out.close();
    if (!out) throw std::runtime_error("could not write " + path + ".tmp");
    fs::rename(path + ".tmp", path);
  }
  return names;
}

// All passes of one cell: filesystem x workload x threads x state.
struct Cell {
  std::vector<double> rate;          // files/s (files) or MB/s (shards)
  std::vector<double> cpu_per_unit;  // daemon CPU s per 1,000 files / per GB
  int64_t errors = 0;
  std::string first_error;
};

class PeersBench {
 public:
  explicit PeersBench(const PeersBenchOptions& o) : options_(o) {}
  int run();

 private:
  bool measure(const std::string& name, int threads, int repeat);
  void pass(const std::string& name, CaseMount& m, const std::string& workload, int threads,
            const std::string& state, uint64_t seed);
  bool drop(std::string* why);
  void printTables(std::FILE* out) const;
  json toJson() const;
  static std::string key(const std::string& fs, const std::string& w, int t, const std::string& s) {
    return fs + "/" + w + "/" + std::to_string(t) + "/" + s;
  }

  const PeersBenchOptions& options_;
  std::string source_;
  std::string ram_cache_;
  std::vector<std::string> file_paths_;   // relative to the source root
  std::vector<std::string> shard_paths_;  // relative to the source root
  uint64_t file_bytes_ = 0;
  std::unique_ptr<ScratchDir> scratch_;
  std::map<std::string, Cell> cells_;
  std::map<std::string, std::string> skipped_;
  std::map<std::string, int> daemon_processes_;  // processes whose CPU is counted, per fs
  std::string drop_note_;
  double load_before_ = 0, load_after_ = 0;
  std::string started_;
};

bool PeersBench::drop(std::string* why) { return dropPageCache(why, 3); }

void PeersBench::pass(const std::string& name, CaseMount& m, const std::string& workload,
                      int threads, const std::string& state, uint64_t seed) {
  std::vector<std::string> paths;
  for (const auto& rel : workload == "files" ? file_paths_ : shard_paths_) {
    paths.push_back(m.root() + "/" + rel);
  }
  double cpu_before = m.daemonCpuSeconds();
  PassResult r =
      workload == "files" ? runReadPass(paths, threads, seed) : runOrderedPass(paths, threads);
  double cpu = m.daemonCpuSeconds() - cpu_before;
  Cell& c = cells_[key(name, workload, threads, state)];
  double rate = workload == "files" ? r.filesPerSecond() : r.megabytesPerSecond();
  c.rate.push_back(rate);
  if (r.files > 0) {
    c.cpu_per_unit.push_back(workload == "files" ? cpu / r.files * 1000 : cpu / (r.bytes / 1e9));
  }
  c.errors += r.errors;
  if (c.first_error.empty()) c.first_error = r.first_error;
  std::fprintf(
      stderr, "  %-8s %-6s T=%d %-4s %10.1f %s  daemon CPU %.2f s%s\n", name.c_str(),
      workload.c_str(), threads, state.c_str(), rate, workload == "files" ? "files/s" : "MB/s   ",
      cpu, r.errors ? (" " + std::to_string(r.errors) + " ERRORS: " + r.first_error).c_str() : "");
}

// One mount of `name` for `threads` readers: its cold and warm passes. False if
// the filesystem could not be mounted (it is then skipped from here on).
bool PeersBench::measure(const std::string& name, int threads, int repeat) {
  std::string why;
  if (!drop(&why) && drop_note_.empty()) drop_note_ = "page cache NOT dropped: " + why;
  auto m = CaseMount::open(name, source_, options_.epochfs, {"--ram-cache", ram_cache_}, *scratch_,
                           &why);
  if (!m) {
    skipped_[name] = why;
    std::fprintf(stderr, "peers: %s skipped: %s\n", name.c_str(), why.c_str());
    return false;
  }
  if (!daemon_processes_.count(name)) {  // once per filesystem: whose CPU is counted
    daemon_processes_[name] = static_cast<int>(m->daemonPids().size());
    std::string pids;
    for (pid_t p : m->daemonPids()) pids += " " + std::to_string(p);
    std::fprintf(stderr, "peers: %s mounted at %s; daemon CPU from pid(s)%s\n", name.c_str(),
                 m->root().c_str(), pids.empty() ? " (none)" : pids.c_str());
  }
  uint64_t seed = 1000u * static_cast<uint64_t>(repeat) + static_cast<uint64_t>(threads);
  for (const auto& state : kStates) {
    if (state == "warm") drop(&why);
    for (const auto& workload : kWorkloads) {
      if (cleanupStarted()) return true;
      pass(name, *m, workload, threads, state, seed);
    }
  }
  return true;
}

int PeersBench::run() {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  started_ = stamp;
  fs::create_directories(options_.dir);
  source_ = fs::canonical(options_.dir).string();
  ensureDataset(source_ + "/files", options_.spec);
  for (const auto& rel : datasetFiles(options_.spec)) file_paths_.push_back("files/" + rel);
  for (int i = 0; i < options_.spec.files; ++i) file_bytes_ += datasetFileBytes(options_.spec, i);
  for (const auto& name : ensureShards(source_ + "/shards", options_.shards, options_.shard_mb)) {
    shard_paths_.push_back("shards/" + name);
  }
  uint64_t total = file_bytes_ + (static_cast<uint64_t>(options_.shards * options_.shard_mb) << 20);
  ram_cache_ = options_.ram_cache.empty() ? std::to_string(total / 4 * 5 / (1 << 20) + 256) + "M"
                                          : options_.ram_cache;
  scratch_ = std::make_unique<ScratchDir>("/tmp/epochbench-peers-");
  load_before_ = loadAverage();
  const size_t n = options_.filesystems.size();
  for (int repeat = 0; repeat < options_.repeats && !cleanupStarted(); ++repeat) {
    std::fprintf(stderr, "peers: repeat %d/%d (load %.1f)\n", repeat + 1, options_.repeats,
                 loadAverage());
    for (size_t k = 0; k < n; ++k) {
      const std::string& name = options_.filesystems[(k + repeat) % n];  // rotated order
      for (int t : options_.threads) {
        if (skipped_.count(name) || !measure(name, t, repeat)) break;
      }
    }
  }
  load_after_ = loadAverage();
  scratch_.reset();
  printTables(stdout);
  if (!options_.json_path.empty()) {
    std::ofstream out(options_.json_path);
    out << toJson().dump(1) << "\n";
    if (!out) throw std::runtime_error("could not write " + options_.json_path);
    std::fprintf(stderr, "peers: wrote %s\n", options_.json_path.c_str());
  }
  for (const auto& [k, c] : cells_) {
    if (c.errors > 0) return 1;
  }
  return 0;
}

std::string spread(const std::vector<double>& v, const char* format) {
  if (v.empty()) return "-";
  Summary s = summarize(v);
  char buf[128];
  std::string f = std::string(format) + " [" + format + ".." + format + "]";
  std::snprintf(buf, sizeof(buf), f.c_str(), s.median, s.min, s.max);
  return buf;
}

void PeersBench::printTables(std::FILE* out) const {
  std::fprintf(out,
               "\nepochbench peers: %d files (%.1f MB), %d shards x %d MiB, %d repeats, "
               "median [min..max]; load average %.1f before, %.1f after%s%s\n",
               options_.spec.files, file_bytes_ / 1e6, options_.shards, options_.shard_mb,
               options_.repeats, load_before_, load_after_, drop_note_.empty() ? "" : "; ",
               drop_note_.c_str());
  for (const auto& workload : kWorkloads) {
    bool files = workload == "files";
    std::fprintf(out, "\n%s\n\n| filesystem | state |",
                 files ? "Shuffled whole-file reads of ~110 KB files: files/s, and daemon CPU s "
                         "per 1,000 files"
                       : "Sequential reads of shard files (1 MiB reads): MB/s, and daemon CPU s "
                         "per GB");
    for (int t : options_.threads) std::fprintf(out, " T=%d %s |", t, files ? "files/s" : "MB/s");
    for (int t : options_.threads) std::fprintf(out, " T=%d CPU s/%s |", t, files ? "1k" : "GB");
    std::fprintf(out, "\n|---|---|");
    for (size_t i = 0; i < 2 * options_.threads.size(); ++i) std::fprintf(out, "---|");
    std::fprintf(out, "\n");
    for (const auto& name : options_.filesystems) {
      if (auto it = skipped_.find(name); it != skipped_.end()) {
        std::fprintf(out, "| %s | skipped: %s |\n", name.c_str(), it->second.c_str());
        continue;
      }
      for (const auto& state : kStates) {
        std::fprintf(out, "| %s | %s |", name.c_str(), state.c_str());
        for (int t : options_.threads) {
          auto it = cells_.find(key(name, workload, t, state));
          std::fprintf(out, " %s |",
                       it == cells_.end() ? "-" : spread(it->second.rate, "%.0f").c_str());
        }
        for (int t : options_.threads) {
          auto it = cells_.find(key(name, workload, t, state));
          std::fprintf(out, " %s |",
                       it == cells_.end() || name == "native"
                           ? "-"
                           : spread(it->second.cpu_per_unit, "%.3f").c_str());
        }
        std::fprintf(out, "\n");
      }
    }
  }
  std::fflush(out);
}

json PeersBench::toJson() const {
  utsname uts{};
  ::uname(&uts);
  json config = {{"dir", source_},
                 {"files", options_.spec.files},
                 {"classes", options_.spec.classes},
                 {"mean_kb", options_.spec.mean_kb},
                 {"file_bytes", file_bytes_},
                 {"shards", options_.shards},
                 {"shard_mib", options_.shard_mb},
                 {"threads", options_.threads},
                 {"repeats", options_.repeats},
                 {"filesystems", options_.filesystems},
                 {"ram_cache", ram_cache_},
                 {"read_buffer_bytes", kReadBufferBytes},
                 {"can_drop_caches", ::geteuid() == 0},
                 {"drop_note", drop_note_},
                 {"daemon_processes", daemon_processes_},
                 {"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
                 {"load_average_before", load_before_},
                 {"load_average_after", load_after_},
                 {"started_utc", started_},
                 {"kernel", uts.release}};
  json cells = json::array();
  for (const auto& name : options_.filesystems) {
    for (const auto& workload : kWorkloads) {
      for (int t : options_.threads) {
        for (const auto& state : kStates) {
          auto it = cells_.find(key(name, workload, t, state));
          if (it == cells_.end()) continue;
          const Cell& c = it->second;
          Summary s = summarize(c.rate);
          json cell = {{"fs", name},
                       {"workload", workload},
                       {"threads", t},
                       {"state", state},
                       {workload == "files" ? "files_per_s" : "mb_per_s", c.rate},
                       {"median", s.median},
                       {"min", s.min},
                       {"max", s.max},
                       {"errors", c.errors}};
          if (name != "native") {
            cell[workload == "files" ? "daemon_cpu_s_per_1k_files" : "daemon_cpu_s_per_gb"] =
                c.cpu_per_unit;
          }
          if (!c.first_error.empty()) cell["first_error"] = c.first_error;
          cells.push_back(cell);
        }
      }
    }
  }
  return {{"benchmark", "epochbench peers"},
          {"config", config},
          {"cells", cells},
          {"skipped", skipped_}};
}

}  // namespace

int runPeersBenchmark(const PeersBenchOptions& options) { return PeersBench(options).run(); }

}  // namespace epochfs::bench
