// The JSON shapes of epochctl's --json output (docs/ADMIN.md), for
// shapeErrors() in the admin tests.
#pragma once

#include <nlohmann/json.hpp>

namespace epochfs::itest::shapes {

inline nlohmann::json tier() {
  return {{"hit_chunks", "uint"},     {"hit_bytes", "uint"}, {"used_bytes", "uint"},
          {"capacity_bytes", "uint"}, {"chunks", "uint"},    {"evictions", "uint"},
          {"corruptions", "uint"}};
}

inline nlohmann::json status() {
  return {{"version", "string"},
          {"libraries",
           {{"fuse_protocol", "string"},
            {"kernel_fuse_protocol", "string"},
            {"libfuse", "string"},
            {"ucx", "string"}}},
          {"pid", "uint"},
          {"source", "string"},
          {"mountpoint", "string"},
          {"uptime_s", "number"},
          {"dataset",
           {{"version", "uint"},
            {"files", "uint"},
            {"dirs", "uint"},
            {"bytes", "uint"},
            {"snapshot_s", "number"},
            {"pending_additions", "uint"}}},
          {"options",
           {{"ram_cache", "uint"},
            {"cache_dir", "string"},
            {"disk_cache", "uint"},
            {"chunk_size", "uint"},
            {"prefetch_memory", "uint"},
            {"memory_limit", "uint"},
            {"memory_limit_source", "string"},
            {"threads", "uint"},
            {"revalidate", "uint"},
            {"allow_other", "bool"},
            {"admin_group", "string|null"},
            {"command_line", nlohmann::json::array({"string"})}}},
          {"tiers", {{"ram", {{"used_bytes", "uint"}, {"capacity_bytes", "uint"}}}}},
          {"members", "null"},
          {"plan", "object|null"},
          {"admin", {{"socket", "string"}, {"metrics_port", "uint|null"}}}};
}

inline nlohmann::json plan() {
  return {{"streams", "uint"},
          {"entries", "uint"},
          {"consumed", "uint"},
          {"ranks", nlohmann::json::array({"int"})},
          {"epochs", nlohmann::json::array({"int"})},
          {"source", "string"}};
}

inline nlohmann::json stats() {
  return {{"uptime_s", "number"},
          {"dataset_version", "uint"},
          {"read_requests", "uint"},
          {"read_bytes", "uint"},
          {"coalesced", "uint"},
          {"source_errors", "uint"},
          {"tiers",
           {{"ram", tier()},
            {"source",
             {{"chunks", "uint"},
              {"bytes", "uint"},
              {"read_chunks", "uint"},
              {"read_bytes", "uint"},
              {"errors", "uint"},
              {"latency_us", {{"p50", "uint"}, {"p90", "uint"}, {"p99", "uint"}}}}}}},
          {"peer", {{"hit_chunks", "uint"}, {"hit_bytes", "uint"}}},
          {"prefetch",
           {{"inflight_bytes", "uint"},
            {"inflight_tasks", "uint"},
            {"inflight_peak_bytes", "uint"},
            {"memory_bytes", "uint"},
            {"budget_waits", "uint"},
            {"lead_waits", "uint"},
            {"read_ahead_skipped", "uint"},
            {"read_ahead_chunks", "uint"},
            {"streams", nlohmann::json::array({{{"epoch", "int"},
                                                {"rank", "int"},
                                                {"length", "uint"},
                                                {"start", "uint"},
                                                {"position", "uint"},
                                                {"lead_files", "uint"},
                                                {"lead_seconds", "number"},
                                                {"stalls", "uint"},
                                                {"hits", "uint"},
                                                {"prefetched_files", "uint"},
                                                {"prefetched_bytes", "uint"}}})},
            {"torch_epoch", "int|null"}}},
          {"warm", {{"jobs", "uint"}, {"files", "uint"}, {"bytes", "uint"}, {"errors", "uint"}}},
          {"evict", {{"chunks", "uint"}, {"bytes", "uint"}}},
          {"refreshes", "uint"},
          {"memory",
           {{"limit_bytes", "uint"},
            {"limit_source", "string"},
            {"ram_cache_bytes", "uint"},
            {"prefetch_memory_bytes", "uint"},
            {"rss_bytes", "uint"},
            {"inflight_fetches", "uint"}}},
          {"admin",
           {{"connections", "uint"},
            {"refused", "uint"},
            {"requests", "uint"},
            {"errors", "uint"},
            {"denied", "uint"},
            {"oversized", "uint"},
            {"timeouts", "uint"}}}};
}

inline nlohmann::json lsEntry() {
  return {{"path", "string|object"}, {"type", "string"},
          {"files", "uint"},         {"bytes", "uint"},
          {"chunks", "uint"},        {"ram_bytes", "uint"},
          {"disk_bytes", "uint"},    {"peer_bytes", "null|uint"},
          {"cached_bytes", "uint"},  {"not_cached_bytes", "uint"},
          {"cached_chunks", "uint"}, {"ram_pct", "number"},
          {"disk_pct", "number"},    {"cached_pct", "number"}};
}

inline nlohmann::json warm() {
  return {{"files", "uint"},
          {"files_total", "uint"},
          {"bytes", "uint"},
          {"bytes_total", "uint"},
          {"skipped", "uint"},
          {"errors", "uint"},
          {"first_error", "string|null"},
          {"seconds", "number"},
          {"bytes_per_s", "number"}};
}

inline nlohmann::json evict() {
  return {{"all", "bool"},
          {"tier", "string"},
          {"files", "uint|null"},
          {"chunks", "uint"},
          {"bytes", "uint"}};
}

inline nlohmann::json refresh() {
  return {{"version", "uint"},
          {"added", "uint"},
          {"removed", "uint"},
          {"changed", "uint"},
          {"invalidated_files", "uint"},
          {"added_paths", nlohmann::json::array({"string|object"})},
          {"removed_paths", nlohmann::json::array({"string|object"})},
          {"changed_paths", nlohmann::json::array({"string|object"})},
          {"truncated", "bool"},
          {"remount_needed", "bool"},
          {"seconds", "number"}};
}

inline nlohmann::json mrc() {
  const nlohmann::json ratios = {{"all", "number"}, {"warm", "number"}};
  return {{"source", "string"},
          {"chunk_size", "uint"},
          {"epochs", "uint"},
          {"orders_given", "uint"},
          {"entries", "uint"},
          {"accesses", "uint"},
          {"accessed_bytes", "uint"},
          {"unique_bytes", "uint"},
          {"ram_capacity_bytes", "uint"},
          {"points", nlohmann::json::array({{{"cache_bytes", "uint"},
                                             {"shards", "uint"},
                                             {"lru", ratios},
                                             {"order_aware", ratios},
                                             {"belady", ratios}}})}};
}

}  // namespace epochfs::itest::shapes
