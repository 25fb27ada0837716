#include "tools/bench/epochbench/prefetch_report.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "tools/bench/epochbench/report.h"

namespace epochfs::bench {
namespace {

using nlohmann::json;
using Getter = std::function<std::optional<double>(const EpochRun&)>;

std::string number(double v) {
  double a = std::fabs(v);
  return format(a >= 100 ? "%.0f" : a >= 1 ? "%.2f" : "%.3f", v);
}
std::string percent(double v) { return format("%.2f%%", 100 * v); }
std::string fraction(double v) { return format("%.3f", v); }

std::vector<double> collect(const std::vector<EpochRun>& runs, const Getter& get) {
  std::vector<double> values;
  for (const auto& r : runs) {
    if (auto v = get(r)) values.push_back(*v);
  }
  return values;
}

const EpochCase* findCase(const PrefetchResults& results, const std::string& name) {
  for (const auto& c : results.cases) {
    if (c.name == name && !c.runs.empty()) return &c;
  }
  return nullptr;
}

std::optional<double> median(const PrefetchResults& results, const std::string& name,
                             const Getter& get) {
  const EpochCase* c = findCase(results, name);
  if (c == nullptr) return std::nullopt;
  auto values = collect(c->runs, get);
  if (values.empty()) return std::nullopt;
  return summarize(values).median;
}

const Getter kSeconds = [](const EpochRun& r) { return std::optional<double>(r.pass.seconds); };
const Getter kFilesPerS = [](const EpochRun& r) {
  return std::optional<double>(r.pass.filesPerSecond());
};
const Getter kMbPerS = [](const EpochRun& r) {
  return std::optional<double>(r.pass.megabytesPerSecond());
};
const Getter kStall = [](const EpochRun& r) { return r.stallFraction(); };
const Getter kLead = [](const EpochRun& r) { return r.lead_files; };
const Getter kCpu = [](const EpochRun& r) { return r.daemon_cpu_s; };
const Getter kBusy = [](const EpochRun& r) { return r.cpu_busy; };
const Getter kSourceMb = [](const EpochRun& r) -> std::optional<double> {
  if (r.device_bytes) return *r.device_bytes / 1e6;
  if (r.source_bytes) return *r.source_bytes / 1e6;
  return std::nullopt;
};

// Median (and range, if `with_range`) of `get` over the runs, or "-".
std::vector<std::string> cells(const EpochCase& c, const Getter& get, std::string (*fmt)(double),
                               bool with_range) {
  auto values = collect(c.runs, get);
  if (values.empty())
    return with_range ? std::vector<std::string>{"-", ""} : std::vector<std::string>{"-"};
  Summary s = summarize(values);
  if (!with_range) return {fmt(s.median)};
  return {fmt(s.median), range(s, fmt)};
}

void printEpochTable(std::FILE* out, const PrefetchResults& results) {
  std::vector<std::vector<std::string>> rows = {
      {"case", "epoch s", "min .. max", "files/s", "min .. max", "MB/s", "waited on source",
       "min .. max", "lead files", "epoch/compute-only", "epoch/sleep-only", "x direct",
       "source MB", "daemon CPU s", "CPUs busy"}};
  auto direct = median(results, "direct", kFilesPerS);
  auto floor = median(results, kSleepOnly, kSeconds);
  for (const auto& c : results.cases) {
    if (c.runs.empty()) continue;
    const bool sleep_only = c.name == kSleepOnly;
    std::vector<std::string> row = {c.name};
    for (auto& v : cells(c, kSeconds, number, true)) row.push_back(v);
    for (auto& v : cells(c, kFilesPerS, number, true)) row.push_back(v);
    row.push_back(sleep_only ? "-" : cells(c, kMbPerS, number, false)[0]);
    for (auto& v : cells(c, kStall, percent, true)) row.push_back(v);
    row.push_back(cells(c, kLead, number, false)[0]);
    auto secs = median(results, c.name, kSeconds);
    row.push_back(
        results.compute_only_s > 0 && secs ? format("%.3fx", *secs / results.compute_only_s) : "-");
    row.push_back(floor && secs ? format("%.3fx", *secs / *floor) : "-");
    auto fps = median(results, c.name, kFilesPerS);
    row.push_back(!sleep_only && direct && fps && *direct > 0 ? format("%.2fx", *fps / *direct)
                                                              : "-");
    row.push_back(cells(c, kSourceMb, number, false)[0]);
    row.push_back(cells(c, kCpu, number, false)[0]);
    row.push_back(cells(c, kBusy, percent, false)[0]);
    rows.push_back(row);
  }
  printAligned(out, rows);
  for (const auto& c : results.cases) {
    int64_t errors = 0;
    std::string first;
    for (const auto& r : c.runs) {
      errors += r.pass.errors;
      if (first.empty()) first = r.pass.first_error;
    }
    if (errors > 0) {
      std::fprintf(out, "  %s: %lld read errors, first: %s\n", c.name.c_str(),
                   static_cast<long long>(errors), first.c_str());
    }
  }
}

std::vector<double> evictionValues(
    const EvictionMode& m, int epoch,
    const std::function<std::optional<double>(const EvictionEpoch&)>& get) {
  std::vector<double> values;
  for (const auto& e : m.epochs) {
    if (e.epoch != epoch) continue;
    if (auto v = get(e)) values.push_back(*v);
  }
  return values;
}

std::optional<double> evictionMedian(const PrefetchResults& results, const std::string& mode,
                                     int epoch) {
  for (const auto& m : results.eviction) {
    if (m.name != mode) continue;
    auto v = evictionValues(
        m, epoch, [](const EvictionEpoch& e) { return std::optional<double>(e.rchar_fraction); });
    if (!v.empty()) return summarize(v).median;
  }
  return std::nullopt;
}

void printEvictionTable(std::FILE* out, const PrefetchResults& results) {
  std::vector<std::vector<std::string>> rows = {{"epoch"}};
  using Get = std::function<std::optional<double>(const EvictionEpoch&)>;
  std::vector<std::pair<std::string, Get>> columns = {
      {"rchar", [](const EvictionEpoch& e) { return std::optional<double>(e.rchar_fraction); }},
      {"daemon", [](const EvictionEpoch& e) { return std::optional<double>(e.daemon_fraction); }}};
  if (results.throttled) {
    columns.push_back({"device", [](const EvictionEpoch& e) { return e.device_fraction; }});
  }
  for (const auto& m : results.eviction) {
    for (const auto& [label, get] : columns) {
      rows[0].push_back(m.name + " " + label);
      if (label == "rchar") rows[0].push_back("min .. max");
    }
  }
  rows[0].push_back("target (order-aware rchar)");
  for (int epoch = 1; epoch <= kEvictionEpochs; ++epoch) {
    std::vector<std::string> row = {std::to_string(epoch)};
    for (const auto& m : results.eviction) {
      for (const auto& [label, get] : columns) {
        auto values = evictionValues(m, epoch, get);
        Summary s = summarize(values);
        row.push_back(values.empty() ? "-" : fraction(s.median));
        if (label == "rchar") row.push_back(values.empty() ? "" : range(s, fraction));
      }
    }
    row.push_back(epoch == 1 ? "- (cold)" : format("<= %.3f", kOrderAwareTarget));
    rows.push_back(row);
  }
  printAligned(out, rows);
}

std::string verdict(bool applies, std::optional<double> value, bool ok) {
  if (!applies) return "n/a";
  if (!value) return "SKIP";
  return ok ? "PASS" : "FAIL";
}

// printf of `value` with `fmt`, or "" without a value.
std::string optional(const char* fmt, std::optional<double> value) {
  return value ? format(fmt, *value) : "";
}

}  // namespace

void printEpochProgress(std::FILE* out, const std::string& name, const EpochRun& run, int repeats) {
  auto stall = run.stallFraction();
  std::fprintf(
      out, "  repeat %d/%d  %-10s %7.2f s %8.0f files/s%s%s%s%s%s%s%s\n", run.repeat, repeats,
      name.c_str(), run.pass.seconds, run.pass.filesPerSecond(),
      optional("  CPUs %.0f%% busy",
               run.cpu_busy ? std::optional(100 * *run.cpu_busy) : std::nullopt)
          .c_str(),
      optional("  waited %.2f%%", stall ? std::optional(100 * *stall) : std::nullopt).c_str(),
      optional("  lead %.0f files", run.lead_files).c_str(),
      optional("  daemon CPU %.2f s", run.daemon_cpu_s).c_str(),
      optional("  pushed %.0f",
               run.pushed_files ? std::optional<double>(*run.pushed_files) : std::nullopt)
          .c_str(),
      optional("  daemon reads %.0f",
               run.daemon_reads ? std::optional<double>(*run.daemon_reads) : std::nullopt)
          .c_str(),
      optional("  %.0f read errors",
               run.pass.errors ? std::optional<double>(run.pass.errors) : std::nullopt)
          .c_str());
}

void printEvictionProgress(std::FILE* out, const std::string& mode, const EvictionEpoch& e) {
  std::fprintf(out,
               "  repeat %d  eviction %-11s epoch %d  %6.2f s  source/dataset %.3f (rchar) "
               "%.3f (daemon)%s\n",
               e.repeat, mode.c_str(), e.epoch, e.pass.seconds, e.rchar_fraction, e.daemon_fraction,
               optional(" %.3f (device)", e.device_fraction).c_str());
}

std::vector<Target> prefetchTargets(const PrefetchResults& results) {
  std::vector<Target> targets;
  auto plan_fps = median(results, "plan", kFilesPerS);
  auto direct_fps = median(results, "direct", kFilesPerS);
  std::optional<double> speedup;
  if (plan_fps && direct_fps && *direct_fps > 0) speedup = *plan_fps / *direct_fps;
  bool local = !results.throttled && results.compute_ms == 0;
  targets.push_back({"no throttle, compute-ms 0: plan files/s >= 1.4x direct",
                     speedup ? format("%.2fx", *speedup) : "n/a",
                     verdict(local, speedup, speedup && *speedup >= 1.4)});

  bool slow_source = results.throttled && results.compute_ms > 0;
  auto stall = median(results, "plan", kStall);
  targets.push_back({"throttled, compute-ms > 0: plan reads waiting on the source <= 1%",
                     stall ? percent(*stall) : "n/a",
                     verdict(slow_source, stall, stall && *stall <= 0.01)});
  // The compute-only time is the measured sleep-only pass (the same simulated compute with
  // no I/O: a sleep overshoots its nominal length on a VM), or the nominal time without one.
  auto secs = median(results, "plan", kSeconds);
  auto floor = median(results, kSleepOnly, kSeconds);
  const double computeOnly = floor ? *floor : results.compute_only_s;
  std::optional<double> over;
  if (secs && computeOnly > 0) over = *secs / computeOnly;
  std::string over_text = over ? format("%.3fx", *over) : "n/a";
  if (over && floor && results.compute_only_s > 0)
    over_text += format(" (%.3fx the nominal time)", *secs / results.compute_only_s);
  targets.push_back({floor ? "throttled, compute-ms > 0: plan epoch <= 1.05x compute-only "
                             "(measured: the sleeps alone)"
                           : "throttled, compute-ms > 0: plan epoch <= 1.05x compute-only time",
                     over_text, verdict(slow_source, over, over && *over <= 1.05)});

  for (int epoch = 2; epoch <= kEvictionEpochs; ++epoch) {
    auto v = evictionMedian(results, "order-aware", epoch);
    targets.push_back({"eviction: order-aware epoch " + std::to_string(epoch) +
                           " source/dataset <= " + format("%.3f", kOrderAwareTarget),
                       v ? fraction(*v) : "n/a",
                       verdict(results.eviction_run, v, v && *v <= kOrderAwareTarget)});
  }
  return targets;
}

void printPrefetchReport(std::FILE* out, const PrefetchResults& results,
                         const std::vector<Target>& targets) {
  const json& config = results.config;
  std::fprintf(out,
               "\n%d reader threads, compute %.1f ms/sample, %d repeats, load average %.1f "
               "before, %.1f after (%d CPUs)\n",
               config.value("threads", 0), config.value("compute_ms", 0.0),
               config.value("repeats", 0), config.value("load_average_before", 0.0),
               config.value("load_average_after", 0.0), config.value("cpus", 0));
  if (config.contains("dataset_dir")) {
    std::fprintf(out, "epoch cases: %d files, %.1f MB at %s\n", config.value("files", 0),
                 config.value("dataset_bytes", 0.0) / 1e6,
                 config.value("dataset_dir", std::string()).c_str());
  }
  if (config.contains("eviction_dataset_dir")) {
    std::fprintf(out, "eviction: %d files, %.1f MB at %s\n", config.value("eviction_files", 0),
                 config.value("eviction_dataset_bytes", 0.0) / 1e6,
                 config.value("eviction_dataset_dir", std::string()).c_str());
  }
  if (config.contains("throttled_source")) {
    std::fprintf(out, "source: %s\n", config.value("throttled_source", std::string()).c_str());
  }
  if (!results.cases.empty()) {
    std::fprintf(out, "\nepoch cases (median of repeats; compute-only time %.2f s)\n",
                 results.compute_only_s);
    printEpochTable(out, results);
  }
  if (results.eviction_run) {
    std::fprintf(out,
                 "\neviction: source bytes read per epoch / dataset bytes (%.1f MB dataset, "
                 "%.1f MB RAM tier; LRU expected ~%.3f)\n",
                 results.eviction_dataset_bytes / 1e6, results.eviction_ram_bytes / 1e6,
                 kLruExpected);
    printEvictionTable(out, results);
  }
  auto deep = median(results, "deep", kFilesPerS);
  auto direct = median(results, "direct", kFilesPerS);
  auto plan = median(results, "plan", kFilesPerS);
  if (deep && direct && *direct > 0) {
    // Many plain readers come close to what the device gives at all: a plan epoch cannot go
    // far beyond them, so deep / direct bounds what plan / direct can reach.
    std::fprintf(out, "\ndevice ceiling (deep, %d readers): %.2fx direct",
                 config.value("deep_threads", 0), *deep / *direct);
    if (plan && *deep > 0) std::fprintf(out, "; plan reaches %.0f%% of it", 100 * *plan / *deep);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "\ntargets (informational):\n");
  size_t width = 0;
  for (const auto& t : targets) width = std::max(width, t.name.size());
  for (const auto& t : targets) {
    std::fprintf(out, "  %-*s  %-4s  measured %s\n", static_cast<int>(width), t.name.c_str(),
                 t.verdict.c_str(), t.measured.c_str());
  }
}

json prefetchJson(const PrefetchResults& results, const std::vector<Target>& targets) {
  auto summary = [](const std::vector<double>& v) -> json {
    if (v.empty()) return nullptr;
    Summary s = summarize(v);
    return {{"min", s.min}, {"median", s.median}, {"max", s.max}};
  };
  json doc = {{"config", results.config},
              {"compute_only_s", results.compute_only_s},
              {"cases", json::object()}};
  auto direct = median(results, "direct", kFilesPerS);
  for (const auto& c : results.cases) {
    json runs = json::array();
    for (const auto& r : c.runs) {
      json run = {{"repeat", r.repeat},
                  {"files", r.pass.files},
                  {"errors", r.pass.errors},
                  {"bytes", r.pass.bytes},
                  {"seconds", r.pass.seconds},
                  {"register_s", r.register_s},
                  {"stalls", r.stalls},
                  {"hits", r.hits},
                  {"prefetched_files", r.prefetched_files}};
      if (r.source_bytes) run["source_read_bytes"] = *r.source_bytes;
      if (r.device_bytes) run["device_read_bytes"] = *r.device_bytes;
      if (r.daemon_cpu_s) run["daemon_cpu_s"] = *r.daemon_cpu_s;
      if (r.cpu_busy) run["cpu_busy"] = *r.cpu_busy;
      if (r.pushed_files) run["pushed_files"] = *r.pushed_files;
      if (r.daemon_reads) run["daemon_read_requests"] = *r.daemon_reads;
      if (!r.samples.empty()) run["samples"] = r.samples;
      runs.push_back(run);
    }
    auto fps = median(results, c.name, kFilesPerS);
    auto secs = median(results, c.name, kSeconds);
    doc["cases"][c.name] = {
        {"epoch_s", summary(collect(c.runs, kSeconds))},
        {"files_per_s", summary(collect(c.runs, kFilesPerS))},
        {"mb_per_s", summary(collect(c.runs, kMbPerS))},
        {"waited_on_source", summary(collect(c.runs, kStall))},
        {"lead_files", summary(collect(c.runs, kLead))},
        {"vs_direct", direct && fps && *direct > 0 ? json(*fps / *direct) : json(nullptr)},
        {"epoch_over_compute_only",
         secs && results.compute_only_s > 0 ? json(*secs / results.compute_only_s) : json(nullptr)},
        {"runs", runs}};
  }
  if (results.eviction_run) {
    json modes = json::object();
    for (const auto& m : results.eviction) {
      json epochs = json::array();
      for (const auto& e : m.epochs) {
        json entry = {{"repeat", e.repeat},
                      {"epoch", e.epoch},
                      {"seconds", e.pass.seconds},
                      {"files", e.pass.files},
                      {"rchar_bytes", e.rchar_bytes},
                      {"daemon_source_read_bytes", e.daemon_bytes},
                      {"rchar_fraction", e.rchar_fraction},
                      {"daemon_fraction", e.daemon_fraction}};
        if (e.device_fraction) entry["device_fraction"] = *e.device_fraction;
        epochs.push_back(entry);
      }
      modes[m.name] = epochs;
    }
    doc["eviction"] = {{"dataset_bytes", results.eviction_dataset_bytes},
                       {"ram_cache_bytes", results.eviction_ram_bytes},
                       {"lru_expected", kLruExpected},
                       {"order_aware_target", kOrderAwareTarget},
                       {"modes", modes}};
  }
  json t = json::array();
  for (const auto& target : targets) {
    t.push_back(
        {{"target", target.name}, {"measured", target.measured}, {"result", target.verdict}});
  }
  doc["targets"] = t;
  return doc;
}

}  // namespace epochfs::bench
