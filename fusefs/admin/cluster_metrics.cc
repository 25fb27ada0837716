#include "fusefs/admin/cluster_metrics.h"

#include <string>

#include "fusefs/admin/metric_declarations.h"

namespace epochfs::fusefs {

using cache::Status;

Status declareClusterMetrics(MetricRegistry& registry, const transport::Cluster& cluster) {
  MetricDeclarations d(registry);
  const transport::Cluster* c = &cluster;
  // Sums a PeerInfo field over the peers.
  const auto sum = [c](uint64_t transport::PeerInfo::*field) {
    return [c, field] {
      uint64_t n = 0;
      for (const auto& p : c->peers()) n += p.*field;
      return n;
    };
  };
  const std::string p = "status.members.";
  d(p + "self", MetricKind::kGauge, "", "This node's id.", [c] { return c->config().selfId; });
  d(p + "count", MetricKind::kGauge, "nodes", "Members in the hostfile (this node included).",
    [c] { return c->config().members.size(); });
  d(
      p + "live_peers", MetricKind::kGauge, "nodes", "Members in placement (this node included).",
      [c] {
        size_t live = 0;
        for (const auto& peer : c->peers()) live += peer.live ? 1 : 0;
        return live;
      },
      "epochfs_peers_live");
  d(
      p + "suspect_peers", MetricKind::kGauge, "nodes",
      "Peers suspect now (missed a deadline or sent bad payloads).",
      [c] {
        size_t suspect = 0;
        for (const auto& peer : c->peers()) suspect += peer.state == "suspect" ? 1 : 0;
        return suspect;
      },
      "epochfs_peers_suspect");
  const char* bad =
      "Peer replies rejected by the payload MAC or the XXH3 checksum (fetched elsewhere).";
  d(p + "mac_failures", MetricKind::kCounter, "replies", bad,
    sum(&transport::PeerInfo::macFailures), "epochfs_peer_bad_payloads_total", {{"check", "mac"}});
  d(p + "checksum_failures", MetricKind::kCounter, "replies", bad,
    sum(&transport::PeerInfo::checksumFailures), "epochfs_peer_bad_payloads_total",
    {{"check", "checksum"}});
  const char* refused = "Peer requests refused: file outside the snapshot or another version.";
  d(p + "serve_refused", MetricKind::kCounter, "requests", refused,
    sum(&transport::PeerInfo::serveRefused), "epochfs_peer_refused_requests_total",
    {{"by", "self"}});
  d(p + "fetch_refused", MetricKind::kCounter, "requests", refused,
    sum(&transport::PeerInfo::fetchRefused), "epochfs_peer_refused_requests_total",
    {{"by", "peer"}});
  d(p + "suspect_count", MetricKind::kCounter, "times",
    "Times a peer was made suspect for bad payloads.", sum(&transport::PeerInfo::suspectCount),
    "epochfs_peer_suspicions_total");
  d(
      p + "fits", MetricKind::kGauge, "",
      "1 while the dataset fits 95% of the live members' caches, 0 when it does not.",
      [c] { return c->fit().fits; }, "epochfs_cluster_fits");
  d(p + "dataset_bytes", MetricKind::kGauge, "bytes", "The dataset's bytes per replica.",
    [c] { return c->fit().datasetBytes; });
  d(p + "live_capacity_bytes", MetricKind::kGauge, "bytes",
    "The live members' cache capacity together.", [c] { return c->fit().liveCapacityBytes; });
  return d.status();
}

}  // namespace epochfs::fusefs
