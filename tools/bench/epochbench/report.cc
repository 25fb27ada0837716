#include "tools/bench/epochbench/report.h"

#include <algorithm>
#include <cmath>

namespace epochfs::bench {

std::string format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

std::string range(const Summary& s, std::string (*fmt)(double)) {
  std::string out = "[";  // appended piecewise: GCC 12 -Wrestrict misfires on "[" + string
  out.append(fmt(s.min)).append(" .. ").append(fmt(s.max)).append("]");
  return out;
}

void printAligned(std::FILE* out, const std::vector<std::vector<std::string>>& rows,
                  const std::vector<std::string>& notes) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const std::string& cell = rows[r][i];
      std::string pad(widths[i] - cell.size(), ' ');
      line += (i == 0 || r == 0 ? cell + pad : pad + cell) + "  ";  // numbers right-aligned
    }
    if (r < notes.size()) line += notes[r];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
}

namespace {

using nlohmann::json;

// Enough digits to read, no more: 85123, 912, 12.35, 0.0421.
std::string number(double v) {
  double a = std::fabs(v);
  return format(a >= 100 ? "%.0f" : a >= 1 ? "%.2f" : "%.4f", v);
}

std::string fixed4(double v) { return format("%.4f", v); }

json summaryJson(const std::vector<double>& values) {
  if (values.empty()) return nullptr;
  Summary s = summarize(values);
  return json{{"min", s.min}, {"median", s.median}, {"max", s.max}};
}

std::optional<double> ratioTo(const std::vector<CaseResult>& cases, const CaseResult& c,
                              const std::string& baseline) {
  auto base = medianFilesPerSecond(cases, baseline);
  auto mine = medianFilesPerSecond(cases, c.name);
  if (!base || !mine || *base <= 0) return std::nullopt;
  return *mine / *base;
}

}  // namespace

Summary summarize(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {values.front(), median, values.back()};
}

std::vector<double> CaseResult::filesPerSecond() const {
  std::vector<double> v;
  for (const auto& p : passes) v.push_back(p.filesPerSecond());
  return v;
}

std::vector<double> CaseResult::megabytesPerSecond() const {
  std::vector<double> v;
  for (const auto& p : passes) v.push_back(p.megabytesPerSecond());
  return v;
}

std::optional<double> medianFilesPerSecond(const std::vector<CaseResult>& cases,
                                           const std::string& name) {
  for (const auto& c : cases) {
    if (c.name == name && c.measured()) return summarize(c.filesPerSecond()).median;
  }
  return std::nullopt;
}

std::vector<Check> doneWhenChecks(const std::vector<CaseResult>& cases) {
  std::vector<Check> checks = {{"epochfs-hot", "native", 0.7, std::nullopt},
                               {"epochfs-ram", "bindfs", 1.8, std::nullopt}};
  for (auto& check : checks) {
    auto subject = medianFilesPerSecond(cases, check.subject);
    auto baseline = medianFilesPerSecond(cases, check.baseline);
    if (subject && baseline && *baseline > 0) check.ratio = *subject / *baseline;
  }
  return checks;
}

void printTable(std::FILE* out, const std::vector<CaseResult>& cases) {
  std::vector<std::vector<std::string>> rows = {{"case", "files/s", "min .. max", "MB/s",
                                                 "min .. max", "daemon CPU s/1k files",
                                                 "min .. max", "x native", "x bindfs"}};
  std::vector<std::string> notes = {""};
  for (const auto& c : cases) {
    if (!c.measured()) {
      rows.push_back({c.name, "-", "", "-", "", "-", "", "-", "-"});
      notes.push_back("skipped: " + (c.skipped.empty() ? std::string("no passes") : c.skipped));
      continue;
    }
    Summary fps = summarize(c.filesPerSecond());
    Summary mbps = summarize(c.megabytesPerSecond());
    std::vector<std::string> row = {c.name, number(fps.median), range(fps, number),
                                    number(mbps.median), range(mbps, number)};
    if (c.has_daemon && !c.daemon_cpu_s_per_1k.empty()) {
      Summary cpu = summarize(c.daemon_cpu_s_per_1k);
      row.push_back(fixed4(cpu.median));
      row.push_back(range(cpu, fixed4));
    } else {
      row.insert(row.end(), {"-", ""});
    }
    for (const char* base : {"native", "bindfs"}) {
      auto r = ratioTo(cases, c, base);
      row.push_back(r ? format("%.2fx", *r) : "-");
    }
    rows.push_back(row);
    std::string note = c.note;
    int64_t errors = 0;
    for (const auto& p : c.passes) errors += p.errors;
    if (errors > 0) {
      if (!note.empty()) note += "; ";
      note += std::to_string(errors) + " read errors, first: " + c.passes[0].first_error;
    }
    notes.push_back(note);
  }
  printAligned(out, rows, notes);
}

void printChecks(std::FILE* out, const std::vector<Check>& checks) {
  std::fprintf(out, "done-when checks (informational):\n");
  for (const auto& c : checks) {
    std::string actual = c.ratio ? format("%.2fx", *c.ratio) : std::string("n/a");
    std::fprintf(out, "  %-12s >= %.1fx %-7s  measured %-6s  %s\n", c.subject.c_str(), c.factor,
                 c.baseline.c_str(), actual.c_str(), c.verdict().c_str());
  }
}

json toJson(const json& config, const std::vector<CaseResult>& cases,
            const std::vector<Check>& checks) {
  json doc = {{"config", config}, {"cases", json::object()}, {"ratios", json::object()}};
  for (const auto& c : cases) {
    json entry;
    if (!c.measured()) {
      entry = {{"skipped", c.skipped.empty() ? "no passes" : c.skipped}};
    } else {
      json passes = json::array();
      for (const auto& p : c.passes) {
        passes.push_back(
            {{"files", p.files}, {"errors", p.errors}, {"bytes", p.bytes}, {"seconds", p.seconds}});
      }
      entry = {{"files_per_s", summaryJson(c.filesPerSecond())},
               {"mb_per_s", summaryJson(c.megabytesPerSecond())},
               {"daemon_cpu_s_per_1k_files", summaryJson(c.daemon_cpu_s_per_1k)},
               {"passes", passes}};
      if (!c.note.empty()) entry["note"] = c.note;
      json ratios;
      for (const char* base : {"native", "bindfs"}) {
        auto r = ratioTo(cases, c, base);
        ratios[std::string("vs_") + base] = r ? json(*r) : json(nullptr);
      }
      doc["ratios"][c.name] = ratios;
    }
    doc["cases"][c.name] = entry;
  }
  json checks_json = json::array();
  for (const auto& c : checks) {
    checks_json.push_back(
        {{"check", c.subject + " >= " + format("%.1f", c.factor) + "x " + c.baseline},
         {"ratio", c.ratio ? json(*c.ratio) : json(nullptr)},
         {"result", c.verdict()}});
  }
  doc["checks"] = checks_json;
  return doc;
}

}  // namespace epochfs::bench
