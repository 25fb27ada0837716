#include "tools/epochctl/counter_table.h"

#include <cstdio>
#include <sstream>

#include "tools/epochctl/formatting.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {

// "stats.tiers.ram.hit_bytes" -> ("tiers.ram", "hit_bytes"); "" when the path
// is not of `command`'s reply.
std::pair<std::string, std::string> sectionAndName(const std::string& path,
                                                   const std::string& command) {
  if (path.rfind(command + ".", 0) != 0) return {"", ""};
  const std::string rest = path.substr(command.size() + 1);
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return {"-", rest};
  return {rest.substr(0, dot), rest.substr(dot + 1)};
}

// The value at SECTION.NAME ("-" for none) of `values`, or null.
const json* valueAt(const json& values, const std::string& section, const std::string& name) {
  const json* at = &values;
  std::string key;
  std::istringstream keys(section == "-" ? name : section + '.' + name);
  while (std::getline(keys, key, '.')) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at;
}

}  // namespace

CounterTable::CounterTable(json schema, std::string command)
    : schema_(schema.is_array() ? std::move(schema) : json::array()),
      command_(std::move(command)) {}

std::string CounterTable::formatValue(const json& v, const std::string& unit) {
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (!v.is_number()) return v.dump();
  char buf[64];
  if (unit == "bytes" && v.is_number_unsigned()) return humanBytes(v.get<uint64_t>());
  if (v.is_number_float()) {
    std::snprintf(buf, sizeof buf, unit == "seconds" ? "%.1f s" : "%.3g", v.get<double>());
    return buf;
  }
  std::string out = v.dump();
  if (unit == "seconds") out += " s";
  return out;
}

std::string CounterTable::render(const json& values) const {
  std::ostringstream o;
  std::string lastSection;
  size_t zeros = 0;
  for (const json& m : schema_) {
    const std::string kind = m.value("kind", "");
    if ((kind != "counter" && kind != "gauge") || !m["row_label"].is_null()) continue;
    const auto [section, name] = sectionAndName(m.value("path", ""), command_);
    if (name.empty()) continue;
    const json* v = valueAt(values, section, name);
    if (v == nullptr || v->is_null()) continue;
    if ((v->is_number() && v->get<double>() == 0) || (v->is_boolean() && !v->get<bool>())) {
      ++zeros;
      continue;
    }
    char line[512];
    const std::string shown = section == "-" ? command_ : section;
    std::snprintf(line, sizeof line, "  %-16s %-22s %12s  %s\n",
                  section == lastSection ? "" : shown.c_str(), name.c_str(),
                  formatValue(*v, m.value("unit", "")).c_str(), m.value("help", "").c_str());
    lastSection = section;
    o << line;
  }
  if (zeros > 0) o << "  (" << zeros << " more at 0; --json shows every value)\n";
  return o.str();
}

std::string CounterTable::describe() const {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-44s %-9s %-8s %s\n", "path", "kind", "unit",
                "Prometheus family {labels}");
  o << line;
  for (const json& m : schema_) {
    std::string family = m["family"].is_string() ? m["family"].get<std::string>() : "-";
    std::ostringstream labels;
    const json labelMap = m.value("labels", json::object());  // outlives the loop
    for (const auto& [k, v] : labelMap.items()) {
      labels << (labels.tellp() > 0 ? "," : "") << k << "=\"" << v.get<std::string>() << '"';
    }
    if (m["row_label"].is_string()) {
      labels << (labels.tellp() > 0 ? "," : "") << m["row_label"].get<std::string>() << "=ROW";
    }
    if (labels.tellp() > 0) family.append("{").append(labels.str()).append("}");
    std::snprintf(line, sizeof line, "%-44s %-9s %-8s %s\n    %s\n", m.value("path", "").c_str(),
                  m.value("kind", "").c_str(), m.value("unit", "").c_str(), family.c_str(),
                  m.value("help", "").c_str());
    o << line;
  }
  return o.str();
}

}  // namespace epochfs::ctl
