#include "fusefs/admin/admin_commands.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "cache/disk_tier.h"
#include "fusefs/admin/admin_paths.h"
#include "fusefs/admin/cluster_metrics.h"
#include "fusefs/admin/mount_metrics.h"
#include "fusefs/admin/plan_builder.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;

namespace {}  // namespace

AdminCommands::AdminCommands(const MountState& mount)
    : m_(mount),
      auth_(mount.ns, geteuid(), mount.config.adminGid),
      cacheCommands_(mount.ns, mount.cache, mount.ram, auth_, mount.config.maxPlanEntries),
      clusterCommands_(mount.ns, mount.cluster, auth_),
      refresher_(mount.ns, mount.cache, mount.snapshot, mount.namespaceUpdated) {}

Status AdminCommands::registerAll(AdminServer& server) {
  server_ = &server;
  Status declared =
      declareMountMetrics(metrics_, {m_, refresher_, cacheCommands_.warmCounters(),
                                     cacheCommands_.evictCounters(), &server.counters()});
  if (!declared.isOk()) return declared;
  if (m_.cluster != nullptr) {
    declared = declareClusterMetrics(metrics_, *m_.cluster);
    if (!declared.isOk()) return declared;
  }
  registerHandlers(server);
  return Status::ok();
}

void AdminCommands::registerHandlers(AdminServer& server) {
  auto reader = [this](json (AdminCommands::*fn)() const) {
    return [this, fn](const json&, AdminSession& s) {
      auth_.requireReader(s);
      return (this->*fn)();
    };
  };
  server.handle(admin::kCmdStatus, reader(&AdminCommands::status));
  server.handle(admin::kCmdStats, [this](const json&, AdminSession& s) {
    auth_.requireReader(s);
    json j = stats();
    // The mount this socket serves: its own readers (the rest is the daemon's).
    if (m_.mountStats) j["mount"] = m_.mountStats(s.mount.id);
    return j;
  });
  server.handle(admin::kCmdMetrics, [this](const json&, AdminSession& s) {
    auth_.requireReader(s);
    return json{{"text", metricsText()}};
  });
  server.handle(admin::kCmdSchema, [this](const json&, AdminSession& s) {
    auth_.requireReader(s);
    return json{{"metrics", metrics_.schema()}};
  });
  server.handle(admin::kCmdPlans, [this](const json&, AdminSession& s) {
    auth_.requireReader(s);
    json j = plans_.summary(s.mount.id);
    j["chunk_size"] = m_.cache.chunkSize();
    j["ram_capacity_bytes"] = m_.ram.usage().capacityBytes;
    j["ram_shards"] = m_.ram.shardCount();
    // What `epochctl mrc` models the tier with (cache/ram_tier.h).
    j["ram_tier"] = {{"max_shards", cache::RamTier::kMaxShards},
                     {"min_shard_bytes", cache::RamTier::kMinShardBytes},
                     {"victim_scan", cache::RamTier::kVictimScan}};
    return j;
  });
  server.handle(admin::kCmdPlanEntries, [this](const json& req, AdminSession& s) {
    auth_.requireReader(s);
    return plans_.page(s.mount.id, req.value("rank", 0), req.value("offset", uint64_t{0}));
  });
  server.handle(admin::kCmdChunkShards, [this](const json& req, AdminSession& s) {
    auth_.requireReader(s);
    return chunkShards(req);
  });
  server.handle(admin::kCmdRefresh, [this](const json&, AdminSession& s) {
    auth_.requireAdmin(s);
    auto r = refresher_.refresh();
    if (!r.isOk()) throw AdminError::from(r.status());
    auto paths = [](const std::vector<std::string>& v) {
      json a = json::array();
      for (const auto& p : v) a.push_back(encodeAdminPath(p));
      return a;
    };
    return json{{"version", r->version},
                {"added", r->added},
                {"removed", r->removed},
                {"changed", r->changed},
                {"invalidated_files", r->invalidatedFiles},
                {"added_paths", paths(r->addedPaths)},
                {"removed_paths", paths(r->removedPaths)},
                {"changed_paths", paths(r->changedPaths)},
                {"truncated", r->truncated},
                {"remount_needed", r->notAdded > 0},
                {"seconds", r->seconds}};
  });
  server.handle(admin::kCmdUnmount, [this](const json&, AdminSession& s) {
    auth_.requireMountOwner(s);
    spdlog::info("admin: unmount of mount {} requested by uid {}", s.mount.id, s.caller.uid);
    if (m_.unmountOne) {
      // This mount alone; the daemon ends with its last one: once the reply
      // is sent, as a stopping daemon closes its admin connections.
      auto mnt = m_.servedMount ? m_.servedMount(s.mount.id) : m_.unmountOne(s.mount.id);
      if (!mnt.isOk()) throw AdminError::from(mnt.status());
      if (m_.servedMount) {
        s.afterReply = [unmount = m_.unmountOne, id = s.mount.id] { (void)unmount(id); };
      }
      return json{{"unmounting", *mnt}};
    }
    // Once the reply is sent: the daemon stops as on `kill -TERM` (it
    // unmounts and exits).
    s.afterReply = [stop = m_.stop] {
      if (stop) stop(false);
    };
    return json{{"unmounting", m_.config.mountpoint}};
  });
  server.handle(admin::kCmdUpgrade, [this](const json&, AdminSession& s) -> json {
    auth_.requireAdmin(s);
    if (!m_.supervised || !m_.stop) {
      throw AdminError::unavailable(
          "this mount runs without a supervisor (--no-supervisor): unmount and mount again");
    }
    spdlog::info("admin: upgrade requested by uid {}", s.caller.uid);
    // Once the reply is sent: the supervisor starts the binary on disk again.
    s.afterReply = [stop = m_.stop] { stop(true); };
    return json{{"restarting", getpid()}};
  });
  server.handle(admin::kCmdJoin, [this](const json& req, AdminSession& s) -> json {
    // Only the daemon's own user: the daemon mounts with its credentials.
    if (s.caller.uid != geteuid()) {
      throw AdminError::permissionDenied("only the daemon's user may add a mount to it");
    }
    if (!m_.join) throw AdminError::unavailable("this daemon does not take other mounts");
    const auto mnt = req.find("mountpoint");
    if (mnt == req.end() || !mnt->is_string()) throw AdminError::invalid("mountpoint missing");
    std::optional<uid_t> owner;
    if (const auto o = req.find("owner"); o != req.end() && o->is_number_unsigned()) {
      owner = o->get<uid_t>();
    }
    std::string order;
    if (const auto o = req.find("order"); o != req.end() && o->is_string()) order = *o;
    const Status st =
        m_.join(mnt->get<std::string>(), req.value("allow_other", false), owner, order, s.caller);
    if (!st.isOk()) throw AdminError::from(st);
    return json{{"mounted", *mnt}};
  });
  registerOrder(server);
  cacheCommands_.registerAll(server);
  clusterCommands_.registerAll(server);
}

json AdminCommands::chunkShards(const json& req) const {
  static_assert(cache::RamTier::kMaxShards <= 16, "one hex digit per chunk");
  const json files = req.value("files", json::array());
  if (!files.is_array()) throw AdminError::invalid("files must be an array");
  json out = json::array();
  uint64_t total = 0;
  for (const json& f : files) {
    if (!f.is_array() || f.size() != 3 || !f[1].is_number_unsigned() ||
        !f[2].is_number_unsigned()) {
      throw AdminError::invalid("each file is [file id or path, first chunk, chunks]");
    }
    const uint64_t first = f[1].get<uint64_t>(), count = f[2].get<uint64_t>();
    if (count > admin::kMaxChunkShards - total) {
      throw AdminError::tooLarge("more than " + std::to_string(admin::kMaxChunkShards) +
                                 " chunks in one request");
    }
    total += count;
    if (first > (uint64_t{1} << 32) - count) throw AdminError::tooLarge("chunk index out of range");
    uint64_t fileId = 0;
    if (f[0].is_number_unsigned()) {
      fileId = f[0].get<uint64_t>();
    } else {
      auto raw = decodeAdminPath(f[0]);
      if (!raw.isOk()) throw AdminError::from(raw.status());
      auto ino = resolveAdminPath(m_.ns, *raw);
      if (!ino.isOk() && ino.status().code() == cache::Status::Code::kNotFound) {
        out.push_back(nullptr);
        continue;
      }
      if (!ino.isOk()) throw AdminError::from(ino.status());
      fileId = m_.ns.fileId(*ino);
    }
    std::string digits(count, '0');
    for (uint64_t i = 0; i < count; ++i) {
      const auto key = m_.cache.keyFor(fileId, static_cast<uint32_t>(first + i));
      digits[i] =
          "0123456789abcdef"[cache::RamTier::shardIndex(key.hash, cache::RamTier::kMaxShards)];
    }
    out.push_back(std::move(digits));
  }
  return {{"max_shards", cache::RamTier::kMaxShards}, {"shards", out}};
}

void AdminCommands::registerOrder(AdminServer& server) {
  // A streamed order: begin, append (each message under the 64 KiB cap), commit.
  server.handle(admin::kCmdOrderBegin, [this](const json& req, AdminSession& session) {
    auth_.requireMountOwner(session);
    const int64_t epoch = req.value("epoch", int64_t{0});
    const int rank = req.value("rank", 0);
    const uint64_t start = req.value("start", uint64_t{0});
    if (rank < 0) throw AdminError::invalid("rank must be >= 0");
    session.state =
        std::make_shared<PlanBuilder>(m_.ns, epoch, rank, start, m_.config.maxPlanEntries);
    return json::object();
  });
  server.handle(admin::kCmdOrderAppend, [](const json& req, AdminSession& session) {
    auto* builder = std::any_cast<std::shared_ptr<PlanBuilder>>(&session.state);
    if (builder == nullptr) throw AdminError::invalid("order_append without order_begin");
    const json entries = req.value("entries", json::array());
    // Refuse over-long entries before they reach PlanBuilder (its range
    // parsing runs a std::regex, whose recursion grows with the input).
    for (size_t i = 0; entries.is_array() && i < entries.size(); ++i) {
      const json& e = entries[i];
      const json& p = e.is_object() ? e.value("path", json("")) : e;
      if ((p.is_string() && p.get_ref<const std::string&>().size() > kMaxAdminPathBytes + 42) ||
          (e.is_object() && e.contains("b64") && e["b64"].is_string() &&
           e["b64"].get_ref<const std::string&>().size() > 2 * kMaxAdminPathBytes)) {
        const std::string msg =
            "entry " + std::to_string((*builder)->size() + i) + ": path too long";
        session.state.reset();  // destroys *builder
        throw AdminError::invalid(msg);
      }
    }
    cache::Status s = (*builder)->append(entries);
    if (!s.isOk()) {
      session.state.reset();
      throw AdminError::from(s);
    }
    return json{{"entries", (*builder)->size()}};
  });
  server.handle(admin::kCmdOrderCommit, [this](const json&, AdminSession& session) {
    auto* builder = std::any_cast<std::shared_ptr<PlanBuilder>>(&session.state);
    if (builder == nullptr) throw AdminError::invalid("order_commit without order_begin");
    auto plan = (*builder)->build(session.mount.id);
    session.state.reset();
    if (plan->start() > plan->size()) throw AdminError::invalid("start is past the plan's end");
    // A caller may only order files it can read.
    if (!AdminAuth::isRoot(session)) {
      for (size_t i = 0; i < plan->size(); ++i) {
        auto ino = resolveAdminPath(m_.ns, plan->at(i).relPath);
        if (!ino.isOk() || !auth_.mayRead(session, *ino)) {
          throw AdminError::permissionDenied("entry " + std::to_string(i) + ": uid " +
                                             std::to_string(session.caller.uid) +
                                             " may not read it");
        }
      }
    }
    const size_t n = plan->size();
    plans_.set(plan);
    m_.prefetcher.setPlan(std::move(plan));
    return json{{"entries", n}};
  });
  server.handle(admin::kCmdOrderClear, [this](const json&, AdminSession& session) {
    auth_.requireMountOwner(session);  // this mount's orders only
    m_.prefetcher.clear(session.mount.id);
    plans_.clear(session.mount.id);
    return json::object();
  });
}

json AdminCommands::status() const {
  json tiers = {{"ram",
                 {{"used_bytes", m_.ram.usage().bytesUsed},
                  {"capacity_bytes", m_.ram.usage().capacityBytes}}}};
  if (m_.disk != nullptr) {
    tiers["disk"] = {{"used_bytes", m_.disk->usage().bytesUsed},
                     {"capacity_bytes", m_.disk->usage().capacityBytes},
                     {"dir", m_.config.cacheDir}};
  }
  json plan = nullptr;
  const auto streams = m_.prefetcher.stats();
  if (!streams.empty()) {
    uint64_t entries = 0, position = 0;
    json ranks = json::array(), epochs = json::array();
    bool followed = false;  // some stream is a zero-change order's
    for (const auto& s : streams) {
      followed = followed || (m_.torchEpoch && m_.torchEpoch(s.job));
      entries += s.length;
      position += s.position - s.start;
      ranks.push_back(s.rank);
      epochs.push_back(s.epoch);
    }
    plan = {{"streams", streams.size()}, {"entries", entries},
            {"consumed", position},      {"ranks", ranks},
            {"epochs", epochs},          {"source", followed ? "torch-distributed" : "admin"}};
  }
  const int port = metricsPort_.load();
  json out = {
      {"libraries", m_.libraries ? m_.libraries() : json(nullptr)},
      {"pid", getpid()},
      {"source", m_.config.source},
      {"mountpoint", m_.config.mountpoint},
      {"mounts", m_.mountpoints ? json(m_.mountpoints()) : json::array({m_.config.mountpoint})},
      {"members", nullptr},  // declared in cluster mode (declareClusterMetrics)
      {"options", m_.config.options},
      {"tiers", tiers},
      {"plan", plan},
      {"admin",
       {{"socket", server_ != nullptr ? json(server_->path()) : json(nullptr)},
        {"metrics_port", port >= 0 ? json(port) : json(nullptr)}}},
  };
  if (m_.sourceStatus) out["s3"] = m_.sourceStatus();
  out["dataset"] = {{"namespace_source", m_.namespaceSource}};
  if (m_.namespaceOrigin) out["dataset"]["namespace_exchange"] = m_.namespaceOrigin();
  // version, uptime, dataset and members: the declared values.
  out.update(metrics_.snapshot("status"), /*merge_objects=*/true);
  return out;
}

json AdminCommands::stats() const { return metrics_.snapshot("stats"); }

std::string AdminCommands::metricsText() const {
  return metrics_.prometheus({{"mountpoint", m_.config.mountpoint}});
}

}  // namespace epochfs::fusefs
