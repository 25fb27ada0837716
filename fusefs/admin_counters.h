// The counters clients read from admin replies, each named once: its path,
// the command first, exactly as the daemon's MetricRegistry declares it and
// its `schema` reply serves it (fusefs/admin/mount_metrics.cc,
// cluster_metrics.cc; docs/METRICS.md). A table column is
// `stats.prefetch.streams[].stalls`: the key `stalls` of each row.
//
// epochctl and epochbench read values through these constants
// (tools/admin_client/reply_value.h), the Python clients through their twins
// STATS_*/STATUS_* in tools/python/epochfs/admin.py. Kept true by
//   - CTest `admin-command-names` (tools/check/admin-commands): the Python
//     twins equal these, every path of kCounterPaths is in the golden list
//     tests/integration/golden/admin_names.txt, and no client spells a
//     counter key as a literal;
//   - the golden test `python_test_admin_names`: the daemon serves every path
//     of kCounterPaths, and what it serves equals the golden list.
// So a counter renamed on one side only fails those tests.
// Header-only and dependency-free; included by fusefs/admin_protocol.h.
#pragma once

#include <string_view>

namespace epochfs::admin {

// status
inline constexpr const char* kStatusUptime = "status.uptime_s";
inline constexpr const char* kStatusDatasetVersion = "status.dataset.version";
inline constexpr const char* kStatusDatasetFiles = "status.dataset.files";
inline constexpr const char* kStatusDatasetDirs = "status.dataset.dirs";
inline constexpr const char* kStatusDatasetBytes = "status.dataset.bytes";
inline constexpr const char* kStatusDatasetPendingAdditions = "status.dataset.pending_additions";
inline constexpr const char* kStatusRamUsedBytes = "status.tiers.ram.used_bytes";
inline constexpr const char* kStatusRamCapacityBytes = "status.tiers.ram.capacity_bytes";
inline constexpr const char* kStatusDiskUsedBytes = "status.tiers.disk.used_bytes";
inline constexpr const char* kStatusDiskCapacityBytes = "status.tiers.disk.capacity_bytes";
inline constexpr const char* kStatusDiskDir = "status.tiers.disk.dir";  // the cache directory

// stats: FUSE reads
inline constexpr const char* kStatsUptime = "stats.uptime_s";
inline constexpr const char* kStatsReadRequests = "stats.read_requests";
inline constexpr const char* kStatsReadBytes = "stats.read_bytes";
inline constexpr const char* kStatsCoalesced = "stats.coalesced";
inline constexpr const char* kStatsSourceErrors = "stats.source_errors";
// stats: the tiers, in the order READ looks
inline constexpr const char* kStatsRamHitBytes = "stats.tiers.ram.hit_bytes";
inline constexpr const char* kStatsRamHitChunks = "stats.tiers.ram.hit_chunks";
inline constexpr const char* kStatsRamUsedBytes = "stats.tiers.ram.used_bytes";
inline constexpr const char* kStatsRamCapacityBytes = "stats.tiers.ram.capacity_bytes";
inline constexpr const char* kStatsRamEvictions = "stats.tiers.ram.evictions";
inline constexpr const char* kStatsRamOwnedBytes = "stats.tiers.ram.owned.bytes";
inline constexpr const char* kStatsRamOwnedEvictions = "stats.tiers.ram.owned.evictions";
inline constexpr const char* kStatsRamGuestBytes = "stats.tiers.ram.guest.bytes";
inline constexpr const char* kStatsRamGuestChunks = "stats.tiers.ram.guest.chunks";
inline constexpr const char* kStatsRamGuestEvictions = "stats.tiers.ram.guest.evictions";
inline constexpr const char* kStatsDiskHitBytes = "stats.tiers.disk.hit_bytes";
inline constexpr const char* kStatsDiskHitChunks = "stats.tiers.disk.hit_chunks";
inline constexpr const char* kStatsDiskUsedBytes = "stats.tiers.disk.used_bytes";
inline constexpr const char* kStatsDiskCapacityBytes = "stats.tiers.disk.capacity_bytes";
inline constexpr const char* kStatsDiskEvictions = "stats.tiers.disk.evictions";
inline constexpr const char* kStatsDiskHealthy = "stats.tiers.disk.healthy";
inline constexpr const char* kStatsDiskErrors = "stats.tiers.disk.errors";
inline constexpr const char* kStatsDiskProbes = "stats.tiers.disk.probes";
inline constexpr const char* kStatsDiskLastError = "stats.tiers.disk.last_error";
inline constexpr const char* kStatsPeerHitBytes = "stats.peer.hit_bytes";
inline constexpr const char* kStatsPeerHitChunks = "stats.peer.hit_chunks";
inline constexpr const char* kStatsSourceBytes = "stats.tiers.source.bytes";
inline constexpr const char* kStatsSourceChunks = "stats.tiers.source.chunks";
inline constexpr const char* kStatsSourceReadBytes = "stats.tiers.source.read_bytes";
inline constexpr const char* kStatsSourceLatencyP50 = "stats.tiers.source.latency_us.p50";
inline constexpr const char* kStatsSourceLatencyP99 = "stats.tiers.source.latency_us.p99";
// stats: prefetching, and its table of streams (one row per registered order)
inline constexpr const char* kStatsPrefetchInflightBytes = "stats.prefetch.inflight_bytes";
inline constexpr const char* kStatsPrefetchPushPageCache = "stats.prefetch.push_page_cache";
inline constexpr const char* kStatsPrefetchPushedFiles = "stats.prefetch.pushed_files";
inline constexpr const char* kStatsPrefetchPushedBytes = "stats.prefetch.pushed_bytes";
inline constexpr const char* kStatsPrefetchPushFailures = "stats.prefetch.push_failures";
inline constexpr const char* kStatsStreams = "stats.prefetch.streams";
inline constexpr const char* kStatsStreamRank = "stats.prefetch.streams[].rank";
inline constexpr const char* kStatsStreamEpoch = "stats.prefetch.streams[].epoch";
inline constexpr const char* kStatsStreamLength = "stats.prefetch.streams[].length";
inline constexpr const char* kStatsStreamPosition = "stats.prefetch.streams[].position";
inline constexpr const char* kStatsStreamLeadFiles = "stats.prefetch.streams[].lead_files";
inline constexpr const char* kStatsStreamLeadSeconds = "stats.prefetch.streams[].lead_seconds";
inline constexpr const char* kStatsStreamStalls = "stats.prefetch.streams[].stalls";
inline constexpr const char* kStatsStreamHits = "stats.prefetch.streams[].hits";
inline constexpr const char* kStatsStreamPrefetchedFiles =
    "stats.prefetch.streams[].prefetched_files";
inline constexpr const char* kStatsStreamPrefetchedBytes =
    "stats.prefetch.streams[].prefetched_bytes";
// stats: memory
inline constexpr const char* kStatsMemoryRssBytes = "stats.memory.rss_bytes";
inline constexpr const char* kStatsMemoryPressureShrinks = "stats.memory.pressure.shrinks";
inline constexpr const char* kStatsChunkBuffersIdleBytes = "stats.memory.chunk_buffers.idle_bytes";
inline constexpr const char* kStatsChunkBuffersSlabBytes = "stats.memory.chunk_buffers.slab_bytes";
inline constexpr const char* kStatsChunkBuffersSlabHoleBytes =
    "stats.memory.chunk_buffers.slab_hole_bytes";

// Every path above: a one-node mount with a disk tier and an order serves each.
inline constexpr const char* kCounterPaths[] = {
    kStatusUptime,
    kStatusDatasetVersion,
    kStatusDatasetFiles,
    kStatusDatasetDirs,
    kStatusDatasetBytes,
    kStatusDatasetPendingAdditions,
    kStatusRamUsedBytes,
    kStatusRamCapacityBytes,
    kStatusDiskUsedBytes,
    kStatusDiskCapacityBytes,
    kStatusDiskDir,
    kStatsUptime,
    kStatsReadRequests,
    kStatsReadBytes,
    kStatsCoalesced,
    kStatsSourceErrors,
    kStatsRamHitBytes,
    kStatsRamHitChunks,
    kStatsRamUsedBytes,
    kStatsRamCapacityBytes,
    kStatsRamEvictions,
    kStatsRamOwnedBytes,
    kStatsRamOwnedEvictions,
    kStatsRamGuestBytes,
    kStatsRamGuestChunks,
    kStatsRamGuestEvictions,
    kStatsDiskHitBytes,
    kStatsDiskHitChunks,
    kStatsDiskUsedBytes,
    kStatsDiskCapacityBytes,
    kStatsDiskEvictions,
    kStatsDiskHealthy,
    kStatsDiskErrors,
    kStatsDiskProbes,
    kStatsDiskLastError,
    kStatsPeerHitBytes,
    kStatsPeerHitChunks,
    kStatsSourceBytes,
    kStatsSourceChunks,
    kStatsSourceReadBytes,
    kStatsSourceLatencyP50,
    kStatsSourceLatencyP99,
    kStatsPrefetchInflightBytes,
    kStatsPrefetchPushPageCache,
    kStatsPrefetchPushedFiles,
    kStatsPrefetchPushedBytes,
    kStatsPrefetchPushFailures,
    kStatsStreams,
    kStatsStreamRank,
    kStatsStreamEpoch,
    kStatsStreamLength,
    kStatsStreamPosition,
    kStatsStreamLeadFiles,
    kStatsStreamLeadSeconds,
    kStatsStreamStalls,
    kStatsStreamHits,
    kStatsStreamPrefetchedFiles,
    kStatsStreamPrefetchedBytes,
    kStatsMemoryRssBytes,
    kStatsMemoryPressureShrinks,
    kStatsChunkBuffersIdleBytes,
    kStatsChunkBuffersSlabBytes,
    kStatsChunkBuffersSlabHoleBytes,
};

// Served by cluster mounts only (fusefs/admin/cluster_metrics.cc; the staging
// tier of peer prefetch), so not in the one-node golden list: the check finds
// each declared in the daemon's sources instead.
inline constexpr const char* kStatusMembersSelf = "status.members.self";
inline constexpr const char* kStatusMembersCount = "status.members.count";
inline constexpr const char* kStatusMembersLivePeers = "status.members.live_peers";
inline constexpr const char* kStatusMembersFits = "status.members.fits";
inline constexpr const char* kStatusMembersDatasetBytes = "status.members.dataset_bytes";
inline constexpr const char* kStatusMembersLiveCapacityBytes = "status.members.live_capacity_bytes";
inline constexpr const char* kStatsStagingHitBytes = "stats.tiers.staging.hit_bytes";
inline constexpr const char* kStatsStagingHitChunks = "stats.tiers.staging.hit_chunks";
inline constexpr const char* kStatsStagingUsedBytes = "stats.tiers.staging.used_bytes";
inline constexpr const char* kStatsStagingEvictions = "stats.tiers.staging.evictions";
inline constexpr const char* kStatsStagingRefused = "stats.tiers.staging.refused";
inline constexpr const char* kStatsStagingStagedBytes = "stats.tiers.staging.staged_bytes";

inline constexpr const char* kClusterCounterPaths[] = {
    kStatusMembersSelf,     kStatusMembersCount,        kStatusMembersLivePeers,
    kStatusMembersFits,     kStatusMembersDatasetBytes, kStatusMembersLiveCapacityBytes,
    kStatsStagingHitBytes,  kStatsStagingHitChunks,     kStatsStagingUsedBytes,
    kStatsStagingEvictions, kStatsStagingRefused,       kStatsStagingStagedBytes,
};

// A column's key in each row: "stats.prefetch.streams[].stalls" -> "stalls".
constexpr std::string_view columnKey(std::string_view path) {
  const size_t at = path.find("[].");
  return at == std::string_view::npos ? path : path.substr(at + 3);
}

}  // namespace epochfs::admin
