#include "fusefs/admin/mount_metrics.h"

#include <string>
#include <utility>

#include "cache/chunk_buffer_pool.h"
#include "cache/disk_tier.h"
#include "fusefs/admin/admin_commands.h"
#include "fusefs/admin/metric_declarations.h"
#include "fusefs/admin/s3_metrics.h"

namespace epochfs::fusefs {

using cache::Status;
using nlohmann::json;
using Labels = MetricDeclarations::Labels;

namespace {

constexpr MetricKind kCounter = MetricKind::kCounter;
constexpr MetricKind kGauge = MetricKind::kGauge;
constexpr MetricKind kInfo = MetricKind::kInfo;
using Declare = MetricDeclarations;

// A cache tier: what READs found there, what it holds (stats.tiers.NAME).
void declareTier(Declare& d, const std::string& name, std::function<cache::TierUsage()> usage,
                 const cache::TierCounters& hits) {
  const std::string p = "stats.tiers." + name + ".";
  const Labels tier = {{"tier", name}};
  d(
      p + "hit_bytes", kCounter, "bytes",
      "Bytes handed to READ requests, by the tier that had them "
      "(kernel page cache hits are invisible).",
      [&hits] { return hits.bytes.load(); }, "epochfs_served_bytes_total", tier);
  d(
      p + "hit_chunks", kCounter, "chunks",
      "Chunk pieces handed to READ requests, by the tier that had them.",
      [&hits] { return hits.chunks.load(); }, "epochfs_served_chunks_total", tier);
  d(
      p + "used_bytes", kGauge, "bytes", "Bytes a cache tier holds now.",
      [usage] { return usage().bytesUsed; }, "epochfs_tier_used_bytes", tier);
  d(
      p + "capacity_bytes", kGauge, "bytes", "A cache tier's capacity.",
      [usage] { return usage().capacityBytes; }, "epochfs_tier_capacity_bytes", tier);
  d(
      p + "chunks", kGauge, "chunks", "Chunks a cache tier holds now.",
      [usage] { return usage().chunks; }, "epochfs_tier_chunks", tier);
  d(
      p + "evictions", kCounter, "chunks", "Chunks evicted to make room.",
      [usage] { return usage().evictions; }, "epochfs_tier_evictions_total", tier);
  d(
      p + "corruptions", kCounter, "chunks", "Chunks that failed verification and were dropped.",
      [usage] { return usage().corruptions; }, "epochfs_tier_corruptions_total", tier);
}

// The RAM tier's two classes (cache/ram_tier.h): this node's share, guests.
void declareRamClass(Declare& d, const std::string& name,
                     std::function<cache::RamTier::ClassUsage()> usage) {
  const std::string p = "stats.tiers.ram." + name + ".";
  const Labels cls = {{"class", name}};
  d(
      p + "bytes", kGauge, "bytes", "Bytes the RAM tier holds, by class.",
      [usage] { return usage().bytes; }, "epochfs_ram_class_bytes", cls);
  d(
      p + "chunks", kGauge, "chunks", "Chunks the RAM tier holds, by class.",
      [usage] { return usage().chunks; }, "epochfs_ram_class_chunks", cls);
  d(
      p + "evictions", kCounter, "chunks", "RAM tier chunks evicted to make room, by class.",
      [usage] { return usage().evictions; }, "epochfs_ram_class_evictions_total", cls);
}

// Chunk buffers' memory (cache/chunk_buffer_pool.h, cache/huge_page_slabs.h):
// freed buffers kept idle, and the huge-page slabs fresh ones are carved from.
void declareChunkBuffers(Declare& d) {
  const std::string p = "stats.memory.chunk_buffers.";
  const auto pool = [] { return cache::ChunkBufferPool::global().stats(); };
  const auto slabs = [] { return cache::ChunkBufferPool::global().slabStats(); };
  d(
      p + "idle_bytes", kGauge, "bytes", "Freed chunk buffers kept idle for the next source read.",
      [pool] { return pool().idleBytes; }, "epochfs_chunk_buffer_idle_bytes");
  d(
      p + "reused", kCounter, "buffers", "Chunk buffers taken from the idle ones.",
      [pool] { return pool().reused; }, "epochfs_chunk_buffer_reused_total");
  d(
      p + "slab_bytes", kGauge, "bytes",
      "Bytes of the huge-page slabs mapped now (live buffers + holes).",
      [slabs] { return slabs().slabBytes; }, "epochfs_slab_bytes");
  d(
      p + "slab_hole_bytes", kGauge, "bytes",
      "Free ranges in the slabs, resident, kept for the next buffers.",
      [slabs] { return slabs().holeBytes; }, "epochfs_slab_hole_bytes");
  d(
      p + "slab_carved", kCounter, "buffers", "Chunk buffers carved from the slabs.",
      [slabs] { return slabs().carved; }, "epochfs_slab_carved_total");
  d(
      p + "slab_refused", kCounter, "buffers",
      "Carves no hole fitted while the holes were at their bound (malloc served them).",
      [slabs] { return slabs().refused; }, "epochfs_slab_refused_total");
}

// The memory-pressure watcher: how often it capped the RAM tier under the
// cgroup's limit (the cap now is tiers.ram.capacity_bytes).
void declareMemoryPressure(Declare& d, std::function<MemoryPressureFigures()> figures) {
  const std::string p = "stats.memory.pressure.";
  const auto f = [figures] { return figures ? figures() : MemoryPressureFigures{}; };
  d(
      p + "watching", kGauge, "",
      "1 while the memory-pressure watcher samples the cgroup's working set, else 0.",
      [f] { return f().watching; }, "epochfs_memory_pressure_watching");
  d(
      p + "shrinks", kCounter, "shrinks",
      "Times the memory-pressure watcher capped the RAM tier lower (to stay clear of the "
      "cgroup's limit).",
      [f] { return f().shrinks; }, "epochfs_memory_pressure_shrinks_total");
  d(
      p + "lowest_cap_bytes", kGauge, "bytes",
      "The lowest cap the watcher set on the RAM tier (its configured size before a shrink).",
      [f] { return f().lowestCapBytes; }, "epochfs_memory_pressure_lowest_cap_bytes");
  d(
      p + "working_set_bytes", kGauge, "bytes",
      "The memory cgroup's working set (usage less inactive page cache) at the watcher's last "
      "sample; 0 when not watching.",
      [f] { return f().workingSetBytes; }, "epochfs_memory_working_set_bytes");
}

// The disk tier's health (docs/RELIABILITY.md case 7b).
void declareDiskHealth(Declare& d, const cache::DiskTier& disk) {
  const std::string p = "stats.tiers.disk.";
  const auto h = [&disk] { return disk.health(); };
  d(
      p + "healthy", kGauge, "",
      "1 while the disk tier is in use, 0 while it is out (failing disk).",
      [h] { return h().healthy; }, "epochfs_disk_healthy");
  d(p + "errors", kCounter, "errors", "Disk tier I/O errors and timeouts, all kinds.", [h] {
    const cache::DiskHealthStats s = h();
    return s.readErrors + s.writeErrors + s.timeouts;
  });
  const char* errorsHelp = "Disk tier I/O errors and timeouts, by kind.";
  d(p + "read_errors", kCounter, "errors", errorsHelp, [h] { return h().readErrors; },
    "epochfs_disk_errors_total", {{"kind", "read"}});
  d(p + "write_errors", kCounter, "errors", errorsHelp, [h] { return h().writeErrors; },
    "epochfs_disk_errors_total", {{"kind", "write"}});
  d(p + "timeouts", kCounter, "errors", errorsHelp, [h] { return h().timeouts; },
    "epochfs_disk_errors_total", {{"kind", "timeout"}});
  d(p + "skipped", kCounter, "chunks", "Disk tier operations skipped while it was unhealthy.",
    [h] { return h().skipped; });
  d(
      p + "unhealthy_events", kCounter, "events", "Times the disk tier was taken out of use.",
      [h] { return h().unhealthyEvents; }, "epochfs_disk_unhealthy_events_total");
  d(
      p + "probes", kCounter, "probes", "Health probes of an unhealthy disk tier.",
      [h] { return h().probes; }, "epochfs_disk_probes_total");
  d(
      p + "probe_failures", kCounter, "probes", "Health probes that failed.",
      [h] { return h().probeFailures; }, "epochfs_disk_probe_failures_total");
  d(p + "last_error", kInfo, "", "The disk tier's last error.", [h] { return h().lastError; });
  d(p + "torn_tails", kCounter, "segments", "Segment tails found torn at start and cut off.",
    [&disk] { return disk.tornTails(); });
}

void declareSource(Declare& d, const cache::CacheStats& st) {
  const std::string p = "stats.tiers.source.";
  d(p + "bytes", kCounter, "bytes",
    "Bytes handed to READ requests, by the tier that had them (kernel page cache hits are "
    "invisible).",
    [&st] { return st.source.bytes.load(); }, "epochfs_served_bytes_total", {{"tier", "source"}});
  d(p + "chunks", kCounter, "chunks",
    "Chunk pieces handed to READ requests, by the tier that had them.",
    [&st] { return st.source.chunks.load(); }, "epochfs_served_chunks_total", {{"tier", "source"}});
  d(
      p + "read_chunks", kCounter, "chunks", "Whole chunks read from the source.",
      [&st] { return st.sourceReads.chunks.load(); }, "epochfs_source_read_chunks_total");
  d(
      p + "read_bytes", kCounter, "bytes", "Bytes read from the source.",
      [&st] { return st.sourceReads.bytes.load(); }, "epochfs_source_read_bytes_total");
  d(
      p + "errors", kCounter, "errors", "Source reads that failed.",
      [&st] { return st.sourceErrors.load(); }, "epochfs_source_errors_total");
  d.latency(p + "latency_us", "Latency of one chunk read from the source.",
            "epochfs_source_latency_seconds", st.sourceLatency);
}

void declarePrefetch(Declare& d, const MountState& m) {
  const std::string p = "stats.prefetch.";
  const prefetch::Prefetcher& pf = m.prefetcher;
  d(
      p + "inflight_bytes", kGauge, "bytes", "Prefetch and read-ahead bytes being read now.",
      [&pf] { return pf.inflightBytes(); }, "epochfs_prefetch_inflight_bytes");
  d(p + "inflight_tasks", kGauge, "tasks", "Prefetch and read-ahead tasks queued or running.",
    [&pf] { return pf.inflightTasks(); });
  d(p + "inflight_peak_bytes", kGauge, "bytes", "The most bytes ever in flight at once.",
    [&pf] { return pf.peakInflightBytes(); });
  d(
      p + "memory_bytes", kGauge, "bytes", "The prefetch in-flight budget.",
      [&pf] { return pf.options().memoryBytes; }, "epochfs_prefetch_memory_bytes");
  d(
      p + "budget_waits", kCounter, "waits",
      "Times prefetching paused because the in-flight budget was full.",
      [&pf] { return pf.budgetWaits(); }, "epochfs_prefetch_budget_waits_total");
  d(p + "lead_waits", kCounter, "waits",
    "Times prefetching paused because the lead reached its byte cap.",
    [&pf] { return pf.leadWaits(); });
  d(p + "read_ahead_skipped", kCounter, "chunks",
    "Read-ahead chunks skipped because the budget was full.",
    [&pf] { return pf.readAheadSkipped(); });
  d(
      p + "read_ahead_chunks", kCounter, "chunks", "Chunks read ahead of sequential readers.",
      [&pf] { return pf.readAheadChunks(); }, "epochfs_prefetch_read_ahead_chunks_total");
  const std::string push = m.config.pushPageCache;
  d(p + "push_page_cache", kInfo, "", "--push-page-cache: off, on or sentinels.",
    [push] { return push; });
  d(
      p + "pushed_files", kCounter, "files",
      "Prefetched files pushed into the kernel's page cache.", [&pf] { return pf.pushedFiles(); },
      "epochfs_prefetch_pushed_files_total");
  d(
      p + "pushed_bytes", kCounter, "bytes", "Bytes pushed into the kernel's page cache.",
      [&pf] { return pf.pushedBytes(); }, "epochfs_prefetch_pushed_bytes_total");
  d(
      p + "push_failures", kCounter, "files", "Pushes into the page cache the kernel refused.",
      [&pf] { return pf.pushFailures(); }, "epochfs_prefetch_push_failures_total");
  // Zero-change mode: the epoch detected from the reads (-1: not yet; null: off).
  const auto& torchEpoch = m.torchEpoch;
  d(p + "torch_epoch", kGauge, "epoch",
    "--order torch-distributed: the epoch the first mount's order detected.", [&torchEpoch] {
      const auto e = torchEpoch ? torchEpoch(0) : std::nullopt;
      return e ? json(*e) : json(nullptr);
    });
  d(p + "streams", kInfo, "", "The registered orders' streams, one row each.", [&pf] {
    json rows = json::array();
    for (const auto& s : pf.stats()) {
      rows.push_back({{"epoch", s.epoch},
                      {"rank", s.rank},
                      {"job", s.job},
                      {"length", s.length},
                      {"start", s.start},
                      {"position", s.position},
                      {"lead_files", s.leadFiles},
                      {"lead_seconds", s.leadSeconds},
                      {"stalls", s.stalls},
                      {"hits", s.hits},
                      {"prefetched_files", s.prefetchedFiles},
                      {"prefetched_bytes", s.prefetchedBytes}});
    }
    return rows;
  });
  const std::string col = p + "streams[].";
  d.column(col + "length", kGauge, "files", "Entries of a registered order.",
           "epochfs_prefetch_plan_entries", "job,rank");
  d.column(col + "position", kGauge, "files", "A stream's position in its order.",
           "epochfs_prefetch_position", "job,rank");
  d.column(col + "lead_files", kGauge, "files", "Entries prefetched ahead of the reader.",
           "epochfs_prefetch_lead_files", "job,rank");
  d.column(col + "lead_seconds", kGauge, "seconds", "The lead in seconds of reading.",
           "epochfs_prefetch_lead_seconds", "job,rank");
  d.column(col + "stalls", kCounter, "files", "Planned reads that waited on the source.",
           "epochfs_prefetch_stalls_total", "job,rank");
  d.column(col + "hits", kCounter, "files", "Planned reads served from a cache tier.",
           "epochfs_prefetch_hits_total", "job,rank");
  d.column(col + "prefetched_files", kCounter, "files", "Entries the prefetcher fetched.",
           "epochfs_prefetch_files_total", "job,rank");
  d.column(col + "prefetched_bytes", kCounter, "bytes", "Bytes the prefetcher fetched.",
           "epochfs_prefetch_bytes_total", "job,rank");
}

}  // namespace

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Status declareMountMetrics(MetricRegistry& registry, const MountMetricSources& src) {
  Declare d(registry);
  const MountState& m = src.mount;
  const NamespaceRefresher& refresher = src.refresher;
  const auto startedAt = m.startedAt;
  const DatasetNamespace& ns = m.ns;

  // status
  d(
      "status.version", kInfo, "", "Always 1; the daemon's version as a label.",
      [] { return AdminCommands::kVersion; }, "epochfs_info");
  d(
      "status.uptime_s", kGauge, "seconds", "Seconds since the mount.",
      [startedAt] { return secondsSince(startedAt); }, "epochfs_uptime_seconds");
  d(
      "status.dataset.version", kGauge, "",
      "Dataset version (1 at mount, +1 per refresh that found changes).",
      [&refresher] { return refresher.version(); }, "epochfs_dataset_version");
  d(
      "status.dataset.files", kGauge, "files", "Regular files in the mount-time snapshot.",
      [&ns] { return ns.fileCount(); }, "epochfs_dataset_files");
  d("status.dataset.dirs", kGauge, "dirs", "Directories in the mount-time snapshot.",
    [&ns] { return ns.dirCount(); });
  d(
      "status.dataset.bytes", kGauge, "bytes", "Bytes of regular files in the mount-time snapshot.",
      [&ns] { return ns.totalBytes(); }, "epochfs_dataset_bytes");
  const double snapshotSeconds = m.snapshotSeconds;
  d("status.dataset.snapshot_s", kGauge, "seconds", "Seconds the mount-time snapshot took.",
    [snapshotSeconds] { return snapshotSeconds; });
  d(
      "status.dataset.pending_additions", kGauge, "entries",
      "Entries the last refresh found in the source but could not add (only a remount shows them).",
      [&refresher] { return refresher.pendingAdditions(); }, "epochfs_dataset_pending_additions");

  // stats: FUSE reads
  const cache::CacheStats& st = m.cache.stats();
  d("stats.uptime_s", kGauge, "seconds", "Seconds since the mount.",
    [startedAt] { return secondsSince(startedAt); });
  d("stats.dataset_version", kGauge, "", "Dataset version (as status.dataset.version).",
    [&refresher] { return refresher.version(); });
  d(
      "stats.read_requests", kCounter, "requests", "FUSE READ requests answered with data.",
      [&st] { return st.readRequests.load(); }, "epochfs_read_requests_total");
  d(
      "stats.read_bytes", kCounter, "bytes", "Bytes returned by FUSE READ requests.",
      [&st] { return st.readBytes.load(); }, "epochfs_read_bytes_total");
  d(
      "stats.coalesced", kCounter, "misses",
      "Misses that waited for another reader's fetch of the same chunk.",
      [&st] { return st.coalesced.load(); }, "epochfs_coalesced_misses_total");
  d("stats.source_errors", kCounter, "errors", "Source reads that failed (as tiers.source.errors).",
    [&st] { return st.sourceErrors.load(); });

  // stats: tiers, in the order READ looks (ram, staging, disk, peer, source)
  const cache::RamTier& ram = m.ram;
  declareTier(
      d, "ram", [&ram] { return ram.usage(); }, st.ram);
  declareRamClass(d, "owned", [&ram] { return ram.owned(); });
  declareRamClass(d, "guest", [&ram] { return ram.guests(); });
  if (m.cache.clustered()) {  // peer prefetch: the staged guests of the RAM tier
    declareTier(
        d, "staging",
        [&ram] {
          const cache::RamTier::StagedUsage sg = ram.staged();
          cache::TierUsage u;
          u.bytesUsed = sg.bytes;
          u.capacityBytes = ram.guestExtraBytes();
          u.chunks = sg.chunks;
          u.evictions = sg.droppedUnread;
          return u;
        },
        st.staging);
    const std::string p = "stats.tiers.staging.";
    d(p + "refused", kCounter, "chunks", "Staged chunks refused for want of room.",
      [&ram] { return ram.staged().refused; });
    d(p + "staged_chunks", kCounter, "chunks", "Chunks peer prefetch staged.",
      [&st] { return st.stagedReads.chunks.load(); });
    d(p + "staged_bytes", kCounter, "bytes", "Bytes peer prefetch staged.",
      [&st] { return st.stagedReads.bytes.load(); });
  }
  if (const cache::ChunkStore* disk = m.disk; disk != nullptr) {
    declareTier(
        d, "disk", [disk] { return disk->usage(); }, st.disk);
    if (auto* tier = dynamic_cast<const cache::DiskTier*>(disk)) declareDiskHealth(d, *tier);
  }
  d("stats.peer.hit_bytes", kCounter, "bytes",
    "Bytes handed to READ requests, by the tier that had them (kernel page cache hits are "
    "invisible).",
    [&st] { return st.peer.bytes.load(); }, "epochfs_served_bytes_total", {{"tier", "peer"}});
  d("stats.peer.hit_chunks", kCounter, "chunks",
    "Chunk pieces handed to READ requests, by the tier that had them.",
    [&st] { return st.peer.chunks.load(); }, "epochfs_served_chunks_total", {{"tier", "peer"}});
  declareSource(d, st);
  if (m.s3 != nullptr) declareS3Metrics(d, *m.s3);
  declarePrefetch(d, m);

  // stats: commands
  const WarmCounters& w = src.warm;
  d(
      "stats.warm.jobs", kCounter, "jobs", "warm commands run.", [&w] { return w.jobs.load(); },
      "epochfs_warm_jobs_total");
  d(
      "stats.warm.files", kCounter, "files", "Files warm fetched.", [&w] { return w.files.load(); },
      "epochfs_warm_files_total");
  d(
      "stats.warm.bytes", kCounter, "bytes", "Bytes warm fetched (from any tier).",
      [&w] { return w.bytes.load(); }, "epochfs_warm_bytes_total");
  d(
      "stats.warm.errors", kCounter, "files", "Files warm could not fetch.",
      [&w] { return w.errors.load(); }, "epochfs_warm_errors_total");
  const EvictCounters& e = src.evict;
  d(
      "stats.evict.chunks", kCounter, "chunks", "Chunk copies dropped by evict commands.",
      [&e] { return e.chunks.load(); }, "epochfs_evicted_chunks_total");
  d(
      "stats.evict.bytes", kCounter, "bytes", "Bytes dropped by evict commands.",
      [&e] { return e.bytes.load(); }, "epochfs_evicted_bytes_total");
  d(
      "stats.refreshes", kCounter, "refreshes", "refresh commands run.",
      [&refresher] { return refresher.refreshes(); }, "epochfs_refreshes_total");

  // stats: memory — the budgets derived from the limit (docs/CONFIGURATION.md)
  // next to what the process holds now.
  const MountConfig& o = m.config;
  d(
      "stats.memory.limit_bytes", kGauge, "bytes",
      "The memory limit the defaults derive from (cgroup limit or MemTotal).",
      [&o] { return o.memoryLimitBytes; }, "epochfs_memory_limit_bytes");
  d("stats.memory.limit_source", kInfo, "", "Where the memory limit came from.",
    [&o] { return o.memoryLimitSource; });
  d("stats.memory.ram_cache_bytes", kGauge, "bytes", "The RAM tier's budget.",
    [&o] { return o.ramCacheBytes; });
  d("stats.memory.prefetch_memory_bytes", kGauge, "bytes", "The prefetch in-flight budget.",
    [&o] { return o.prefetchMemoryBytes; });
  d(
      "stats.memory.rss_bytes", kGauge, "bytes", "The daemon's resident set size.",
      [rss = m.residentBytes] { return rss ? rss() : uint64_t{0}; }, "epochfs_resident_bytes");
  const cache::ChunkCache& cache = m.cache;
  d("stats.memory.inflight_fetches", kGauge, "fetches", "Chunk fetches in progress.",
    [&cache] { return cache.inflightFetches(); });
  declareMemoryPressure(d, m.memoryPressure);
  declareChunkBuffers(d);

  // stats: the admin socket
  if (const AdminServerCounters* c = src.admin; c != nullptr) {
    const std::string p = "stats.admin.";
    d(
        p + "connections", kCounter, "connections", "Admin connections served.",
        [c] { return c->connections.load(); }, "epochfs_admin_connections_total");
    d(
        p + "refused", kCounter, "connections",
        "Admin connections refused (connection limit reached).", [c] { return c->refused.load(); },
        "epochfs_admin_refused_total");
    d(
        p + "requests", kCounter, "requests", "Admin requests handled.",
        [c] { return c->requests.load(); }, "epochfs_admin_requests_total");
    d(
        p + "errors", kCounter, "requests", "Admin requests answered with an error.",
        [c] { return c->errors.load(); }, "epochfs_admin_errors_total");
    d(
        p + "denied", kCounter, "requests", "Admin requests refused for permissions.",
        [c] { return c->denied.load(); }, "epochfs_admin_denied_total");
    d(
        p + "oversized", kCounter, "messages",
        "Admin messages over the 64 KiB cap (connection closed).",
        [c] { return c->oversized.load(); }, "epochfs_admin_oversized_total");
    d(
        p + "timeouts", kCounter, "connections",
        "Admin connections closed idle or mid-message after the receive timeout.",
        [c] { return c->timeouts.load(); }, "epochfs_admin_timeouts_total");
  }
  return d.status();
}

}  // namespace epochfs::fusefs
