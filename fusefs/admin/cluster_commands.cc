#include "fusefs/admin/cluster_commands.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <vector>

#include "fusefs/admin/admin_paths.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using nlohmann::json;

void ClusterCommands::registerAll(AdminServer& server) {
  server.handle(admin::kCmdPeers, [this](const json&, AdminSession& session) {
    auth_.requireReader(session);
    return peers();
  });
  server.handle(admin::kCmdPlacement, [this](const json& req, AdminSession& session) {
    auth_.requireReader(session);
    return placement(req.value("start", uint64_t{0}), req.value("count", uint64_t{1000}));
  });
}

json ClusterCommands::placement(uint64_t start, uint64_t count) const {
  // The version names the live member set: ranks compare it to be sure they
  // all built an epoch's assignment from the same map.
  std::vector<uint32_t> live;
  uint32_t self = 0;
  if (cluster_) {
    self = cluster_->config().selfId;
    for (const auto& p : cluster_->peers()) {
      if (p.live) live.push_back(p.id);
    }
  }
  const uint64_t version = XXH3_64bits(live.data(), live.size() * sizeof(uint32_t));
  json entries = json::array();
  uint64_t index = 0, total = 0;
  size_t replyBytes = 256;
  bool full = false;
  for (DatasetNamespace::Ino ino = 1; ino <= ns_.nodeCount(); ++ino) {
    if (!S_ISREG(ns_.attr(ino).mode)) continue;
    ++total;
    if (index++ < start || full || entries.size() >= count) continue;
    const auto owners = cluster_ ? cluster_->owners(ns_.fileId(ino)) : std::vector<uint32_t>{self};
    json e = json::array({encodeAdminPath(ns_.path(ino)),
                          owners.empty() ? -1 : static_cast<int64_t>(owners.front())});
    replyBytes += e.dump().size() + 1;
    if (replyBytes > admin::kMaxMessageBytes - 1024) {
      full = true;  // the client pages on from start + entries.size()
      continue;
    }
    entries.push_back(std::move(e));
  }
  return {{"version", version},
          {"self", self},
          {"total", total},
          {"start", start},
          {"entries", std::move(entries)}};
}

json ClusterCommands::peers() const {
  if (!cluster_) return json{{"clustered", false}, {"members", nullptr}, {"peers", json::array()}};
  json peers = json::array();
  for (const auto& p : cluster_->peers()) {
    peers.push_back({{"id", p.id},
                     {"address", p.address},
                     {"state", p.state},
                     {"live", p.live},
                     {"capacity_bytes", p.capacityBytes},
                     {"owned_bytes", p.ownedBytes},
                     {"fetches", p.fetches},
                     {"bytes_fetched", p.bytesFetched},
                     {"fetch_errors", p.fetchErrors},
                     {"timeouts", p.timeouts},
                     {"served", p.served},
                     {"bytes_served", p.bytesServed},
                     {"serve_errors", p.serveErrors},
                     {"auth_failures", p.authFailures},
                     {"connects", p.connects},
                     {"mac_failures", p.macFailures},
                     {"checksum_failures", p.checksumFailures},
                     {"serve_refused", p.serveRefused},
                     {"fetch_refused", p.fetchRefused},
                     {"suspect_count", p.suspectCount},
                     {"suspect_for_ms", p.suspectForMs},
                     {"faults_injected", p.faultsInjected},
                     {"last_error", p.lastError}});
  }
  const auto& c = cluster_->config();
  const transport::Cluster::Fit fit = cluster_->fit();
  return json{{"clustered", true},
              {"self", c.selfId},
              {"members", c.members.size()},
              {"listen_port", cluster_->listenPort()},
              {"replicas", c.replicas},
              {"integrity", c.macPayloads ? "mac" : "checksum"},
              {"deadline_ms", c.deadline.count()},
              {"placement_ready", fit.ready},
              {"fits", fit.fits},
              {"dataset_bytes", fit.datasetBytes},
              {"live_capacity_bytes", fit.liveCapacityBytes},
              {"peers", std::move(peers)}};
}

}  // namespace epochfs::fusefs
