// Reading a counter out of an admin reply by its path (fusefs/admin_counters.h),
// so that no client spells a counter's keys: replyValue(statsReply,
// admin::kStatsRamHitBytes) walks "tiers" -> "ram" -> "hit_bytes" of the
// `stats` reply (the path's first segment names the command, whose reply
// `reply` is). A table row's field: rowValue(row, admin::kStatsStreamStalls).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>

#include "fusefs/admin_protocol.h"

namespace epochfs::admin {

// The value at `path` in `reply`, or nullptr when a key on the way is absent
// (an older daemon, a tier this mount does not have).
inline const nlohmann::json* replyValue(const nlohmann::json& reply, std::string_view path) {
  const size_t first = path.find('.');
  if (first == std::string_view::npos) return nullptr;
  const nlohmann::json* at = &reply;
  std::string_view rest = path.substr(first + 1);
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string key(rest.substr(0, dot));
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  return at;
}

// Whether `reply` has a value at `path`.
inline bool replyHas(const nlohmann::json& reply, std::string_view path) {
  return replyValue(reply, path) != nullptr;
}

// The value at `path` as T, or `fallback` when absent or of another type.
template <typename T>
T replyValueOr(const nlohmann::json& reply, std::string_view path, T fallback) {
  const nlohmann::json* v = replyValue(reply, path);
  if (v == nullptr || v->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (v->is_number()) return v->get<double>() != 0;
    return v->is_boolean() ? v->get<bool>() : fallback;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v->is_string() ? v->get<std::string>() : fallback;
  } else {
    return v->is_number() ? v->get<T>() : fallback;
  }
}

// A counter: the unsigned value at `path`, 0 when absent or not unsigned.
inline uint64_t replyCount(const nlohmann::json& reply, std::string_view path) {
  const nlohmann::json* v = replyValue(reply, path);
  return v != nullptr && v->is_number_unsigned() ? v->get<uint64_t>() : 0;
}

// One table row's field of column `path` ("stats.prefetch.streams[].stalls"),
// as T, or `fallback` when absent or of another type.
template <typename T>
T rowValueOr(const nlohmann::json& row, std::string_view path, T fallback) {
  if (!row.is_object()) return fallback;
  const auto it = row.find(std::string(columnKey(path)));
  if (it == row.end() || !it->is_number()) return fallback;
  return it->get<T>();
}

}  // namespace epochfs::admin
