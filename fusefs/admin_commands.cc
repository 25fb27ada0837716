#include "fusefs/admin_commands.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "fusefs/admin_protocol.h"
#include "fusefs/plan_builder.h"

namespace epochfs::fusefs {

using nlohmann::json;

namespace {

json tierJson(const cache::TierUsage& u, const cache::TierCounters& hits) {
  return {{"hit_chunks", hits.chunks.load()}, {"hit_bytes", hits.bytes.load()},
          {"used_bytes", u.bytesUsed},        {"capacity_bytes", u.capacityBytes},
          {"chunks", u.chunks},               {"evictions", u.evictions},
          {"corruptions", u.corruptions}};
}

}  // namespace

AdminCommands::AdminCommands(const MountState& mount) : m_(mount) {}

void AdminCommands::requireOwner(const AdminSession& session) {
  if (session.caller.uid != 0 && session.caller.uid != geteuid()) {
    throw std::runtime_error("permission denied: only the daemon's owner or root may do this");
  }
}

void AdminCommands::registerAll(AdminServer& server) {
  server.handle(admin::kCmdStatus, [this](const json&, AdminSession&) { return status(); });
  server.handle(admin::kCmdStats, [this](const json&, AdminSession&) { return stats(); });

  // A streamed order: begin, append (each message under the 64 KiB cap), commit.
  server.handle(admin::kCmdOrderBegin, [this](const json& req, AdminSession& session) {
    requireOwner(session);
    const int64_t epoch = req.value("epoch", int64_t{0});
    const int rank = req.value("rank", 0);
    const uint64_t start = req.value("start", uint64_t{0});
    if (rank < 0) throw std::invalid_argument("rank must be >= 0");
    session.state = std::make_shared<PlanBuilder>(m_.ns, epoch, rank, start,
                                                  m_.options.maxPlanEntries);
    return json::object();
  });
  server.handle(admin::kCmdOrderAppend, [](const json& req, AdminSession& session) {
    auto* builder = std::any_cast<std::shared_ptr<PlanBuilder>>(&session.state);
    if (builder == nullptr) throw std::invalid_argument("order_append without order_begin");
    cache::Status s = (*builder)->append(req.value("entries", json::array()));
    if (!s.isOk()) {
      session.state.reset();
      throw std::invalid_argument(s.message());
    }
    return json{{"entries", (*builder)->size()}};
  });
  server.handle(admin::kCmdOrderCommit, [this](const json&, AdminSession& session) {
    auto* builder = std::any_cast<std::shared_ptr<PlanBuilder>>(&session.state);
    if (builder == nullptr) throw std::invalid_argument("order_commit without order_begin");
    auto plan = (*builder)->build();
    session.state.reset();
    if (plan->start() > plan->size()) throw std::invalid_argument("start is past the plan's end");
    const size_t n = plan->size();
    m_.prefetcher.setPlan(std::move(plan));
    return json{{"entries", n}};
  });
  server.handle(admin::kCmdOrderClear, [this](const json&, AdminSession& session) {
    requireOwner(session);
    m_.prefetcher.clear();
    return json::object();
  });
}

json AdminCommands::status() const {
  json tiers = {{"ram", {{"used_bytes", m_.ram.usage().bytesUsed},
                         {"capacity_bytes", m_.ram.usage().capacityBytes}}}};
  if (m_.disk != nullptr) {
    tiers["disk"] = {{"used_bytes", m_.disk->usage().bytesUsed},
                     {"capacity_bytes", m_.disk->usage().capacityBytes},
                     {"dir", m_.options.cacheDir}};
  }
  return {
      {"version", "0.1.0"},
      {"pid", getpid()},
      {"source", m_.options.source},
      {"mountpoint", m_.options.mountpoint},
      {"uptime_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - m_.startedAt)
                       .count()},
      {"dataset", {{"files", m_.ns.fileCount()},
                   {"dirs", m_.ns.dirCount()},
                   {"bytes", m_.ns.totalBytes()},
                   {"snapshot_s", m_.snapshotSeconds}}},
      {"options", {{"ram_cache", m_.options.ramCacheBytes},
                   {"cache_dir", m_.options.cacheDir},
                   {"disk_cache", m_.options.diskCacheBytes},
                   {"chunk_size", m_.options.chunkSize},
                   {"threads", m_.options.threads},
                   {"revalidate", m_.options.revalidateSeconds},
                   {"allow_other", m_.options.allowOther},
                   {"command_line", m_.options.given}}},
      {"tiers", tiers},
  };
}

json AdminCommands::stats() const {
  const cache::CacheStats& st = m_.cache.stats();
  json tiers = {{"ram", tierJson(m_.ram.usage(), st.ram)}};
  if (m_.disk != nullptr) tiers["disk"] = tierJson(m_.disk->usage(), st.disk);
  tiers["source"] = {{"chunks", st.source.chunks.load()},
                     {"bytes", st.source.bytes.load()},
                     {"read_chunks", st.sourceReads.chunks.load()},
                     {"read_bytes", st.sourceReads.bytes.load()},
                     {"errors", st.sourceErrors.load()},
                     {"latency_us",
                      {{"p50", st.sourceLatency.quantileMicros(0.5)},
                       {"p90", st.sourceLatency.quantileMicros(0.9)},
                       {"p99", st.sourceLatency.quantileMicros(0.99)}}}};
  json streams = json::array();
  for (const auto& p : m_.prefetcher.stats()) {
    streams.push_back({{"epoch", p.epoch},
                       {"rank", p.rank},
                       {"length", p.length},
                       {"start", p.start},
                       {"position", p.position},
                       {"lead_files", p.leadFiles},
                       {"lead_seconds", p.leadSeconds},
                       {"stalls", p.stalls},
                       {"hits", p.hits},
                       {"prefetched_files", p.prefetchedFiles},
                       {"prefetched_bytes", p.prefetchedBytes}});
  }
  return {{"read_requests", st.readRequests.load()},
          {"prefetch",
           {{"inflight_bytes", m_.prefetcher.inflightBytes()},
            {"read_ahead_chunks", m_.prefetcher.readAheadChunks()},
            {"streams", streams},
            // Zero-change mode: the epoch detected from the reads (-1: not yet).
            {"torch_epoch", m_.follower.load() ? json(m_.follower.load()->epoch()) : json(nullptr)}}},
          {"read_bytes", st.readBytes.load()},
          {"coalesced", st.coalesced.load()},
          {"source_errors", st.sourceErrors.load()},
          {"tiers", tiers}};
}

}  // namespace epochfs::fusefs
