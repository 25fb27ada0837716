#include "fusefs/admin/plan_builder.h"

#include <string_view>

#include "fusefs/admin/admin_paths.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

// Splits "PATH@OFFSET+LENGTH" (decimal, at most 19 digits each).
bool parseRange(const std::string& text, std::string* path, uint64_t* offset, uint64_t* length) {
  const size_t at = text.rfind('@');
  if (at == std::string::npos) return false;
  const size_t plus = text.find('+', at);
  if (plus == std::string::npos) return false;
  auto digits = [](std::string_view d, uint64_t* out) {
    if (d.empty() || d.size() > 19) return false;
    uint64_t v = 0;
    for (char c : d) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    *out = v;
    return true;
  };
  const std::string_view all(text);
  if (!digits(all.substr(at + 1, plus - at - 1), offset) || !digits(all.substr(plus + 1), length)) {
    return false;
  }
  *path = text.substr(0, at);
  return true;
}

}  // namespace

PlanBuilder::PlanBuilder(const DatasetNamespace& ns, int64_t epoch, int rank, uint64_t start,
                         uint64_t maxEntries)
    : ns_(ns), epoch_(epoch), rank_(rank), start_(start), maxEntries_(maxEntries) {}

Status PlanBuilder::append(const nlohmann::json& entries) {
  if (!entries.is_array()) return Status::invalidArgument("\"entries\" must be an array");
  if (entries_.size() + entries.size() > maxEntries_) {
    return Status::tooLarge("order exceeds the plan cap of " + std::to_string(maxEntries_) +
                            " entries (--max-plan-entries)");
  }
  for (const auto& e : entries) {
    auto r = resolve(e);
    if (!r.isOk()) {
      return Status::invalidArgument("entry " + std::to_string(entries_.size()) + ": " +
                                     r.status().message());
    }
    entries_.push_back(std::move(r).value());
  }
  return Status::ok();
}

Result<prefetch::PlanEntry> PlanBuilder::resolve(const nlohmann::json& entry) const {
  std::string path;
  bool ranged = false;
  uint64_t offset = 0, length = 0;
  if (entry.is_string()) {
    path = entry.get<std::string>();
    // "path@OFFSET+LENGTH", unless a file is literally named so.
    std::string prefix;
    if (parseRange(path, &prefix, &offset, &length) && !resolveAdminPath(ns_, path).isOk()) {
      path = std::move(prefix);
      ranged = true;
    }
  } else if (entry.is_object()) {
    auto p = decodeAdminPath(entry.contains("b64") ? entry : entry.value("path", nlohmann::json()));
    if (!p.isOk()) return p.status();
    path = *p;
    if (entry.contains("offset") || entry.contains("length")) {
      if (!entry.value("offset", nlohmann::json(0)).is_number_unsigned() ||
          !entry.value("length", nlohmann::json(0)).is_number_unsigned()) {
        return Status::invalidArgument("offset and length must be non-negative integers");
      }
      offset = entry.value("offset", uint64_t{0});
      length = entry.value("length", uint64_t{0});
      ranged = true;
    }
  } else {
    return Status::invalidArgument("an entry must be a path string or an object");
  }
  auto ino = resolveAdminPath(ns_, path);
  if (!ino.isOk()) return ino.status();
  if (!S_ISREG(ns_.attr(*ino).mode))
    return Status::invalidArgument(path + " is not a regular file");
  prefetch::PlanEntry out;
  out.relPath = ns_.path(*ino);
  out.identity = ns_.identity(*ino);
  if (!ranged) {
    out.length = out.identity.size;
  } else {
    if (offset > out.identity.size) return Status::invalidArgument(path + ": offset past the end");
    out.offset = offset;
    out.length = std::min(length, out.identity.size - offset);
  }
  return out;
}

std::shared_ptr<const prefetch::AccessPlan> PlanBuilder::build(uint32_t job) {
  return std::make_shared<const prefetch::AccessPlan>(epoch_, rank_, start_, std::move(entries_),
                                                      job);
}

}  // namespace epochfs::fusefs
