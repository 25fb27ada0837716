// Results of a benchmark run and their presentation: the aligned table, the
// JSON document and the project's "done when" checks.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/epochbench/read_pass.h"

namespace epochfs::bench {

struct Summary {
  double min = 0, median = 0, max = 0;
};

// min/median/max of `values` (median of an even count: mean of the middle two).
Summary summarize(std::vector<double> values);

// printf of one double into a string (the reports' cells).
std::string format(const char* fmt, double value);
// "[min .. max]" of a summary, each end written by `fmt`.
std::string range(const Summary& s, std::string (*fmt)(double));
// Rows as aligned columns (the first row and column left-aligned, the other
// cells right-aligned), row r followed by notes[r] where given.
void printAligned(std::FILE* out, const std::vector<std::vector<std::string>>& rows,
                  const std::vector<std::string>& notes = {});

// All timed passes of one case.
struct CaseResult {
  std::string name;
  std::string skipped;  // why it was not measured; empty if it was
  std::string note;     // caveat shown next to the numbers, e.g. cache not dropped
  std::vector<PassResult> passes;
  bool has_daemon = false;                  // native has none
  std::vector<double> daemon_cpu_s_per_1k;  // one per pass where measurable

  bool measured() const { return skipped.empty() && !passes.empty(); }
  std::vector<double> filesPerSecond() const;
  std::vector<double> megabytesPerSecond() const;
};

// One "done when" criterion: `subject` median files/s >= `factor` x `baseline`.
struct Check {
  std::string subject;
  std::string baseline;
  double factor = 0;
  std::optional<double> ratio;  // nullopt when either case was not measured
  bool passed() const { return ratio && *ratio >= factor; }
  std::string verdict() const { return !ratio ? "SKIP" : passed() ? "PASS" : "FAIL"; }
};

// Median files/s of case `name`, if it was measured.
std::optional<double> medianFilesPerSecond(const std::vector<CaseResult>& cases,
                                           const std::string& name);

// epochfs-hot >= 0.7x native and epochfs-ram >= 1.8x bindfs.
std::vector<Check> doneWhenChecks(const std::vector<CaseResult>& cases);

void printTable(std::FILE* out, const std::vector<CaseResult>& cases);
void printChecks(std::FILE* out, const std::vector<Check>& checks);

// {config, cases: {name: {files_per_s, mb_per_s, daemon_cpu_s_per_1k_files, ...}},
//  ratios: {name: {vs_native, vs_bindfs}}, checks: [...]}.
nlohmann::json toJson(const nlohmann::json& config, const std::vector<CaseResult>& cases,
                      const std::vector<Check>& checks);

}  // namespace epochfs::bench
