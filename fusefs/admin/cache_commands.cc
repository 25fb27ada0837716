#include "fusefs/admin/cache_commands.h"

#include <algorithm>
#include <memory>
#include <unordered_set>
#include <vector>

#include "cache/disk_tier.h"
#include "fusefs/admin/admin_paths.h"
#include "fusefs/admin_protocol.h"

namespace epochfs::fusefs {

using Ino = DatasetNamespace::Ino;
using nlohmann::json;

namespace {

// A connection's warm request: the files gathered by warm_add, then the job.
struct WarmState {
  std::vector<Ino> files;
  std::unordered_set<Ino> seen;
  uint64_t bytes = 0;
  uint64_t skipped = 0;  // files under a named directory the caller may not read
  std::unique_ptr<WarmJob> job;
};

std::shared_ptr<WarmState> warmState(AdminSession& s, bool create) {
  if (auto* p = std::any_cast<std::shared_ptr<WarmState>>(&s.state)) return *p;
  if (!create) throw AdminError::invalid("no warm request on this connection (warm_add first)");
  auto st = std::make_shared<WarmState>();
  s.state = st;  // replaces any other multi-message state of this connection
  return st;
}

std::string shown(const std::string& raw) {
  std::string s = raw.empty() ? "." : raw;
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

}  // namespace

CacheCommands::CacheCommands(const DatasetNamespace& ns, cache::ChunkCache& cache,
                             cache::RamTier& ram, const AdminAuth& auth, uint64_t maxWarmFiles)
    : ns_(ns),
      cache_(cache),
      ram_(ram),
      auth_(auth),
      maxWarmFiles_(maxWarmFiles),
      residency_(ns, cache) {}

void CacheCommands::registerAll(AdminServer& server) {
  server.handle(admin::kCmdLs, [this](const json& r, AdminSession& s) { return ls(r, s); });
  server.handle(admin::kCmdWarmAdd,
                [this](const json& r, AdminSession& s) { return warmAdd(r, s); });
  server.handle(admin::kCmdWarmStart,
                [this](const json& r, AdminSession& s) { return warmStart(r, s); });
  server.handle(admin::kCmdWarmProgress,
                [this](const json&, AdminSession& s) { return warmProgress(s); });
  server.handle(admin::kCmdEvict, [this](const json& r, AdminSession& s) { return evict(r, s); });
}

Ino CacheCommands::resolve(const json& field) const {
  auto raw = decodeAdminPath(field);
  if (!raw.isOk()) throw AdminError::from(raw.status());
  auto ino = resolveAdminPath(ns_, *raw);
  if (!ino.isOk()) throw AdminError::from(ino.status());
  return *ino;
}

template <typename Visit>
void CacheCommands::forEachFile(Ino ino, Visit&& visit) const {
  std::vector<Ino> stack = {ino};
  while (!stack.empty()) {
    const Ino cur = stack.back();
    stack.pop_back();
    const NodeAttr a = ns_.attr(cur);
    if (a.gone) continue;
    if (S_ISREG(a.mode)) {
      visit(cur);
    } else if (S_ISDIR(a.mode) && visit.descend(cur)) {
      const auto kids = ns_.children(cur);
      for (size_t i = kids.size(); i > 0; --i) stack.push_back(kids[i - 1]);
    }
  }
}

json CacheCommands::ls(const json& req, AdminSession& s) const {
  auth_.requireReader(s);
  const Ino ino = resolve(req.value("path", json("")));
  if (!auth_.mayReach(s, ino)) {
    throw AdminError::permissionDenied("cannot reach " + shown(ns_.path(ino)));
  }
  const auto mayDescend = [&](Ino d) { return auth_.mayDescend(s, d); };
  const uint64_t offset = req.value("offset", uint64_t{0});
  json reply = {{"entry", nullptr}, {"children", json::array()}, {"next_offset", nullptr}};
  if (offset == 0) reply["entry"] = residency_.toJson(ino, residency_.of(ino, mayDescend));
  if (!req.value("children", false) || !S_ISDIR(ns_.attr(ino).mode)) return reply;
  if (!mayDescend(ino)) {
    throw AdminError::permissionDenied("cannot list " + shown(ns_.path(ino)));
  }
  const auto& kids = ns_.children(ino);
  size_t bytes = 0;
  for (uint64_t i = offset; i < kids.size(); ++i) {
    if (bytes > kLsPageBytes) {
      reply["next_offset"] = i;
      break;
    }
    if (ns_.attr(kids[i]).gone) continue;
    json e = residency_.toJson(kids[i], residency_.of(kids[i], mayDescend));
    bytes += e.dump().size() + 1;
    reply["children"].push_back(std::move(e));
  }
  return reply;
}

json CacheCommands::warmAdd(const json& req, AdminSession& s) {
  auth_.requireMountOwner(s);
  auto st = warmState(s, true);
  if (st->job) throw AdminError::invalid("this connection's warm job has already started");
  if (!req.contains("paths") || !req["paths"].is_array()) {
    throw AdminError::invalid("warm_add needs \"paths\": [...]");
  }
  auto add = [&](Ino f) {
    if (!st->seen.insert(f).second) return;
    if (st->files.size() >= maxWarmFiles_) {
      throw AdminError::tooLarge("warm list exceeds " + std::to_string(maxWarmFiles_) +
                                 " files (--max-plan-entries)");
    }
    st->files.push_back(f);
    st->bytes += ns_.attr(f).size;
  };
  for (const json& p : req["paths"]) {
    const Ino ino = resolve(p);
    const NodeAttr a = ns_.attr(ino);
    if (S_ISREG(a.mode)) {
      if (!auth_.mayRead(s, ino)) {
        throw AdminError::permissionDenied("uid " + std::to_string(s.caller.uid) +
                                           " may not read " + shown(ns_.path(ino)));
      }
      add(ino);
    } else if (S_ISDIR(a.mode)) {
      if (!auth_.mayReach(s, ino) || !auth_.mayDescend(s, ino)) {
        throw AdminError::permissionDenied("uid " + std::to_string(s.caller.uid) +
                                           " may not read " + shown(ns_.path(ino)));
      }
      struct Visitor {
        CacheCommands* self;
        AdminSession& s;
        WarmState& st;
        decltype(add)& addFile;
        void operator()(Ino f) {
          if (self->auth_.mayRead(s, f)) {
            addFile(f);
          } else {
            ++st.skipped;
          }
        }
        bool descend(Ino d) {
          if (self->auth_.mayDescend(s, d)) return true;
          ++st.skipped;
          return false;
        }
      };
      forEachFile(ino, Visitor{this, s, *st, add});
    } else {
      throw AdminError::invalid(shown(ns_.path(ino)) + " is not a regular file or directory");
    }
  }
  return {{"files", st->files.size()}, {"bytes", st->bytes}, {"skipped", st->skipped}};
}

json CacheCommands::warmStart(const json& req, AdminSession& s) {
  auth_.requireMountOwner(s);
  auto st = warmState(s, false);
  if (st->job) throw AdminError::invalid("this connection's warm job has already started");
  const unsigned threads = std::clamp<unsigned>(req.value("threads", kDefaultWarmThreads), 1u, 64u);
  st->job = std::make_unique<WarmJob>(ns_, cache_, warm_, st->files, threads);
  st->job->start();
  return {{"files", st->files.size()}, {"bytes", st->bytes}, {"skipped", st->skipped}};
}

json CacheCommands::warmProgress(AdminSession& s) const {
  auto st = warmState(s, false);
  if (!st->job) throw AdminError::invalid("warm_progress before warm_start");
  const WarmJob::Progress p = st->job->progress();
  return {{"files_total", p.filesTotal},
          {"files_done", p.filesDone},
          {"bytes_total", p.bytesTotal},
          {"bytes_done", p.bytesDone},
          {"errors", p.errors},
          {"first_error", p.firstError.empty() ? json(nullptr) : json(p.firstError)},
          {"skipped", st->skipped},
          {"seconds", p.seconds},
          {"done", p.done}};
}

void CacheCommands::evictFile(Ino ino, bool ram, bool disk, uint64_t& chunks, uint64_t& bytes) {
  const NodeAttr a = ns_.attr(ino);
  const uint32_t n = cache_.chunkCount(a.size);
  const uint32_t cs = cache_.chunkSize();
  cache::ChunkStore* d = disk ? cache_.disk() : nullptr;
  for (uint32_t i = 0; i < n; ++i) {
    const cache::ChunkKey key = cache_.keyFor(ns_.fileId(ino), i);
    bool dropped = false;
    if (ram && ram_.contains(key)) ram_.erase(key), dropped = true;
    if (d != nullptr && d->contains(key)) d->erase(key), dropped = true;
    if (dropped) {
      ++chunks;
      bytes += std::min<uint64_t>(cs, a.size - uint64_t{i} * cs);
    }
  }
}

json CacheCommands::evict(const json& req, AdminSession& s) {
  auth_.requireAdmin(s);
  const std::string tier = req.value("tier", std::string("all"));
  if (tier != "all" && tier != "ram" && tier != "disk") {
    throw AdminError::invalid("tier must be all, ram or disk");
  }
  if (tier == "disk" && cache_.disk() == nullptr) {
    throw AdminError::invalid("this mount has no disk tier (--cache-dir)");
  }
  const bool ram = tier != "disk", disk = tier != "ram";
  uint64_t files = 0, chunks = 0, bytes = 0;
  if (req.value("all", false)) {
    if (ram) {
      const auto u = ram_.usage();
      const auto staged = ram_.staged();  // clear() keeps them (peer prefetch's)
      ram_.clear();
      chunks += u.chunks - staged.chunks, bytes += u.bytesUsed - staged.bytes;
    }
    if (auto* d = dynamic_cast<cache::DiskTier*>(cache_.disk()); d != nullptr && disk) {
      const auto u = d->usage();
      d->clear();
      chunks += u.chunks, bytes += u.bytesUsed;
    }
    evict_.chunks.fetch_add(chunks), evict_.bytes.fetch_add(bytes);
    return {
        {"all", true}, {"tier", tier}, {"files", nullptr}, {"chunks", chunks}, {"bytes", bytes}};
  }
  if (!req.contains("paths") || !req["paths"].is_array()) {
    throw AdminError::invalid("evict needs \"paths\": [...] or \"all\": true");
  }
  std::vector<Ino> targets;
  for (const json& p : req["paths"]) targets.push_back(resolve(p));  // all checked first
  struct Visitor {
    CacheCommands* self;
    bool ram, disk;
    uint64_t &files, &chunks, &bytes;
    void operator()(Ino f) {
      ++files;
      self->evictFile(f, ram, disk, chunks, bytes);
    }
    bool descend(Ino) { return true; }
  };
  for (Ino ino : targets) forEachFile(ino, Visitor{this, ram, disk, files, chunks, bytes});
  evict_.chunks.fetch_add(chunks), evict_.bytes.fetch_add(bytes);
  return {{"all", false}, {"tier", tier}, {"files", files}, {"chunks", chunks}, {"bytes", bytes}};
}

}  // namespace epochfs::fusefs
