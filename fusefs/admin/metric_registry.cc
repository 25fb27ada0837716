#include "fusefs/admin/metric_registry.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;
using Labels = std::vector<std::pair<std::string, std::string>>;

namespace {

constexpr size_t kMaxTableRows = 256;  // samples per column, as series must stay bounded

bool validName(const std::string& s, bool prometheus) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                    (prometheus && ((c >= 'A' && c <= 'Z') || c == ':'));
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '.')) out.push_back(part);
  if (!path.empty() && path.back() == '.') out.emplace_back();
  return out;
}

// "stats.tiers.ram" -> ("stats", "/tiers/ram").
std::pair<std::string, json::json_pointer> locate(const std::string& path) {
  const size_t dot = path.find('.');
  std::string pointer = path.substr(dot);  // ".tiers.ram"
  for (char& c : pointer) {
    if (c == '.') c = '/';
  }
  return {path.substr(0, dot), json::json_pointer(pointer)};
}

// "stats.prefetch.streams[].hits" -> ("stats.prefetch.streams", "hits").
std::pair<std::string, std::string> columnOf(const std::string& path) {
  const size_t at = path.find("[].");
  return {path.substr(0, at), path.substr(at + 3)};
}

std::string number(double v) {
  char buf[64];
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9.0e15 && v > -9.0e15) {
    std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%.9g", v);
  }
  return buf;
}

std::vector<std::string> rowLabelsOf(const MetricSpec& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < s.rowLabel.size()) {
    const size_t comma = std::min(s.rowLabel.find(',', at), s.rowLabel.size());
    out.push_back(s.rowLabel.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::set<std::string> labelKeys(const MetricSpec& s) {
  std::set<std::string> keys;
  for (const auto& [k, v] : s.labels) keys.insert(k);
  for (const auto& k : rowLabelsOf(s)) keys.insert(k);
  if (s.kind == MetricKind::kInfo) keys.insert(split(s.path).back());
  return keys;
}

// One sample line: name{labels} value.
void sample(std::ostringstream& out, const std::string& name, const Labels& labels, double v) {
  out << name << '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    out << (i ? "," : "") << labels[i].first << "=\""
        << MetricRegistry::escapeLabel(labels[i].second) << '"';
  }
  out << "} " << number(v) << '\n';
}

std::string labelText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

const char* MetricRegistry::kindName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
    case MetricKind::kInfo:
      return "info";
  }
  return "?";
}

std::string MetricRegistry::escapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Status MetricRegistry::check(const MetricSpec& spec, bool column) const {
  const std::string what = "metric " + spec.path + ": ";
  const auto parts =
      split(column ? columnOf(spec.path).first + "." + columnOf(spec.path).second : spec.path);
  if (parts.size() < 2 || (column && spec.path.find("[].") == std::string::npos)) {
    return Status::invalidArgument(what + "a path is COMMAND.KEY[.KEY...]" +
                                   (column ? " with one TABLE[].COLUMN" : ""));
  }
  for (const auto& p : parts) {
    if (!validName(p, false)) return Status::invalidArgument(what + "bad key '" + p + "'");
  }
  if (spec.help.empty()) return Status::invalidArgument(what + "no help text");
  if (column && spec.rowLabel.empty()) return Status::invalidArgument(what + "no row label");
  if (!spec.family.empty()) {
    if (!validName(spec.family, true))
      return Status::invalidArgument(what + "bad family name '" + spec.family + "'");
    const std::string suffix = "_total";
    const bool total =
        spec.family.size() > suffix.size() &&
        spec.family.compare(spec.family.size() - suffix.size(), suffix.size(), suffix) == 0;
    if ((spec.kind == MetricKind::kCounter) != total)
      return Status::invalidArgument(what + "counter families, and only they, end in _total");
  }
  for (const Entry& e : entries_) {
    const std::string& p = e.spec.path;
    if (p == spec.path) return Status::invalidArgument(what + "declared twice");
    if (p.rfind(spec.path + ".", 0) == 0 || spec.path.rfind(p + ".", 0) == 0)
      return Status::invalidArgument(what + "overlaps " + p);
    if (spec.family.empty() || e.spec.family != spec.family) continue;
    if (e.spec.kind != spec.kind || e.spec.help != spec.help ||
        labelKeys(e.spec) != labelKeys(spec))
      return Status::invalidArgument(what + "family " + spec.family +
                                     " declared with another kind, help or label set by " + p);
    if (e.spec.labels == spec.labels && e.spec.rowLabel.empty() && spec.rowLabel.empty())
      return Status::invalidArgument(what + "sample of " + spec.family + " declared twice (" + p +
                                     ")");
  }
  if (column) {
    const std::string table = columnOf(spec.path).first;
    for (const Entry& e : entries_) {
      if (e.spec.path == table && e.spec.kind == MetricKind::kInfo) return Status::ok();
    }
    return Status::invalidArgument(what + "its table " + table + " is not declared (as info)");
  }
  return Status::ok();
}

Status MetricRegistry::add(MetricSpec spec, Value value) {
  if (spec.kind == MetricKind::kHistogram)
    return Status::invalidArgument("metric " + spec.path + ": a histogram needs addHistogram");
  if (!value) return Status::invalidArgument("metric " + spec.path + ": no value function");
  Status s = check(spec, false);
  if (!s.isOk()) return s;
  entries_.push_back({std::move(spec), std::move(value), {}});
  return Status::ok();
}

Status MetricRegistry::addColumn(MetricSpec spec) {
  if (spec.kind != MetricKind::kCounter && spec.kind != MetricKind::kGauge)
    return Status::invalidArgument("metric " + spec.path + ": a column is a counter or a gauge");
  Status s = check(spec, true);
  if (!s.isOk()) return s;
  entries_.push_back({std::move(spec), {}, {}});
  return Status::ok();
}

Status MetricRegistry::addHistogram(MetricSpec spec, Value summary, Buckets buckets) {
  if (spec.kind != MetricKind::kHistogram || !summary || !buckets)
    return Status::invalidArgument("metric " + spec.path +
                                   ": a histogram needs its kind, a summary and buckets");
  Status s = check(spec, false);
  if (!s.isOk()) return s;
  entries_.push_back({std::move(spec), std::move(summary), std::move(buckets)});
  return Status::ok();
}

json MetricRegistry::snapshot(const std::string& command) const {
  json out = json::object();
  for (const Entry& e : entries_) {
    if (!e.value) continue;  // a column: its values are in its table
    auto [cmd, pointer] = locate(e.spec.path);
    if (cmd == command) out[pointer] = e.value();
  }
  return out;
}

json MetricRegistry::schema() const {
  json out = json::array();
  for (const Entry& e : entries_) {
    json labels = json::object();
    for (const auto& [k, v] : e.spec.labels) labels[k] = v;
    out.push_back({{"path", e.spec.path},
                   {"kind", kindName(e.spec.kind)},
                   {"unit", e.spec.unit},
                   {"help", e.spec.help},
                   {"family", e.spec.family.empty() ? json(nullptr) : json(e.spec.family)},
                   {"labels", labels},
                   {"row_label", e.spec.rowLabel.empty() ? json(nullptr) : json(e.spec.rowLabel)}});
  }
  return out;
}

std::string MetricRegistry::prometheus(const Labels& baseLabels) const {
  // Each command's reply once, so that one exposition is one consistent read.
  std::map<std::string, json> replies;
  const auto valueAt = [&](const std::string& path) -> const json* {
    auto [cmd, pointer] = locate(path);
    auto it = replies.find(cmd);
    if (it == replies.end()) it = replies.emplace(cmd, snapshot(cmd)).first;
    return it->second.contains(pointer) ? &it->second[pointer] : nullptr;
  };
  std::vector<std::string> families;  // in order of first declaration
  std::map<std::string, std::vector<const Entry*>> members;
  for (const Entry& e : entries_) {
    if (e.spec.family.empty()) continue;
    auto& list = members[e.spec.family];
    if (list.empty()) families.push_back(e.spec.family);
    list.push_back(&e);
  }
  std::ostringstream out;
  for (const std::string& family : families) {
    const MetricSpec& first = members[family].front()->spec;
    out << "# HELP " << family << ' ' << first.help << '\n'
        << "# TYPE " << family << ' '
        << (first.kind == MetricKind::kInfo ? "gauge" : kindName(first.kind)) << '\n';
    for (const Entry* e : members[family]) {
      Labels labels = baseLabels;
      labels.insert(labels.end(), e->spec.labels.begin(), e->spec.labels.end());
      if (e->buckets) {
        uint64_t total = 0;
        for (const auto& [le, cumulative] : e->buckets()) {
          Labels l = labels;
          l.emplace_back("le", number(le));
          sample(out, family + "_bucket", l, static_cast<double>(cumulative));
          total = cumulative;
        }
        Labels inf = labels;
        inf.emplace_back("le", "+Inf");
        sample(out, family + "_bucket", inf, static_cast<double>(total));
        sample(out, family + "_count", labels, static_cast<double>(total));
      } else if (!e->value) {  // a table column: one sample per row
        const auto [table, column] = columnOf(e->spec.path);
        const json* rows = valueAt(table);
        for (size_t i = 0; rows && rows->is_array() && i < rows->size() && i < kMaxTableRows; ++i) {
          const json& row = (*rows)[i];
          if (!row.is_object() || !row.contains(column) || !row[column].is_number()) continue;
          Labels l = labels;
          for (const auto& k : rowLabelsOf(e->spec))
            l.emplace_back(k, labelText(row.value(k, json())));
          sample(out, family, l, row[column].get<double>());
        }
      } else if (const json* v = valueAt(e->spec.path); v != nullptr) {
        if (e->spec.kind == MetricKind::kInfo) {
          labels.emplace_back(split(e->spec.path).back(), labelText(*v));
          sample(out, family, labels, 1);
        } else if (v->is_number()) {
          sample(out, family, labels, v->get<double>());
        } else if (v->is_boolean()) {
          sample(out, family, labels, v->get<bool>() ? 1 : 0);
        }
      }
    }
  }
  return out.str();
}

}  // namespace epochfs::fusefs
