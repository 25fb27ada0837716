#include "tools/epochctl/mrc_command.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "fusefs/admin_protocol.h"
#include "tools/admin_client/path_field.h"
#include "tools/epochctl/formatting.h"
#include "tools/epochctl/mrc_model.h"
#include "tools/epochctl/path_list.h"

namespace epochfs::ctl {

using nlohmann::json;

namespace {

// Files named by the orders, by key (path or daemon file id), with sizes and
// how chunk_shards names them (the file id, or the path as requests encode it).
class FileTable {
 public:
  uint32_t index(const std::string& key, uint64_t size, const json& ref) {
    auto [it, inserted] = ids_.try_emplace(key, static_cast<uint32_t>(sizes_.size()));
    if (inserted) {
      sizes_.push_back(size);
      refs_.push_back(ref);
    }
    return it->second;
  }
  std::vector<uint64_t>& sizes() { return sizes_; }
  const json& ref(uint32_t file) const { return refs_[file]; }
  uint32_t refSize() const { return static_cast<uint32_t>(refs_.size()); }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<uint64_t> sizes_;
  std::vector<json> refs_;
};

// Gives the model the mount's partition of every chunk into RAM shards
// (chunk_shards, in batches under the message cap). False when the daemon
// does not answer it (an older one): the model then splits by its own hash.
bool loadMountShards(CtlClient& client, const FileTable& files, MrcModel& model) {
  constexpr size_t kRequestBytes = 40 << 10;
  json batch = json::array();
  std::vector<uint32_t> batchFiles;
  uint64_t chunks = 0;
  size_t bytes = 0;
  bool first = true;
  auto flush = [&]() -> bool {
    if (batch.empty()) return true;
    json reply;
    try {
      reply = client.call({{"cmd", admin::kCmdChunkShards}, {"files", batch}});
    } catch (const CtlError&) {
      if (first) return false;
      throw;
    }
    first = false;
    const json& shards = reply["shards"];
    if (!shards.is_array() || shards.size() != batch.size()) {
      throw CtlError("malformed chunk_shards reply from the daemon");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!shards[i].is_string()) continue;  // gone from the mount: the model's hash
      const std::string& digits = shards[i].get_ref<const std::string&>();
      const uint32_t from = batch[i][1].get<uint32_t>();
      for (size_t c = 0; c < digits.size() && c < batch[i][2].get<uint64_t>(); ++c) {
        const int d = std::isdigit(static_cast<unsigned char>(digits[c])) ? digits[c] - '0'
                                                                          : digits[c] - 'a' + 10;
        if (d < 0 || d > 15) throw CtlError("malformed chunk_shards reply from the daemon");
        model.setChunkShard(batchFiles[i], from + static_cast<uint32_t>(c),
                            static_cast<uint8_t>(d));
      }
    }
    batch = json::array();
    batchFiles.clear();
    chunks = 0;
    bytes = 0;
    return true;
  };
  for (uint32_t f = 0; f < files.refSize(); ++f) {
    const uint32_t n = model.fileChunks(f);
    for (uint32_t from = 0; from < n;) {
      const uint32_t take =
          static_cast<uint32_t>(std::min<uint64_t>(n - from, admin::kMaxChunkShards));
      const size_t entryBytes = files.ref(f).dump().size() + 24;
      if (chunks + take > admin::kMaxChunkShards || bytes + entryBytes > kRequestBytes) {
        if (!flush()) return false;
      }
      batch.push_back({files.ref(f), from, take});
      batchFiles.push_back(f);
      chunks += take;
      bytes += entryBytes;
      from += take;
    }
  }
  return flush();
}

bool safeRelative(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  std::stringstream in(p);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

// An order file: "path" or "path@OFFSET+LENGTH" per line, sized by lstat
// through the mount.
std::vector<MrcModel::Entry> readOrderFile(const std::string& file, const std::string& mount,
                                           FileTable& files) {
  std::ifstream in(file);
  if (!in) throw CtlError("cannot read " + file + ": " + std::strerror(errno));
  static const std::regex kRange(R"(^(.*)@([0-9]{1,19})\+([0-9]{1,19})$)");
  std::unordered_map<std::string, uint64_t> sizeOf;
  std::vector<MrcModel::Entry> out;
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.size() > 8192) throw CtlError(file + ": entry " + std::to_string(n) + " is too long");
    PathList one(mount);
    one.add(line);
    std::string path = one.paths()[0];
    uint64_t offset = 0, length = UINT64_MAX;
    struct stat st;
    std::smatch m;
    bool found = safeRelative(path) && lstat((mount + "/" + path).c_str(), &st) == 0;
    if (!found && std::regex_match(path, m, kRange)) {
      path = m[1].str();
      offset = std::stoull(m[2].str());
      length = std::stoull(m[3].str());
      found = safeRelative(path) && lstat((mount + "/" + path).c_str(), &st) == 0;
    }
    if (!found || !S_ISREG(st.st_mode)) {
      throw CtlError(file + ": entry " + std::to_string(n) + " (" + line.substr(0, 200) +
                     "): not a regular file under " + mount);
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    out.push_back(
        {files.index(path, size, admin::encodePath(path)), offset, std::min(length, size)});
    ++n;
  }
  return out;
}

// The registered plans of every rank, interleaved round-robin from each
// plan's start (several ranks on one node read concurrently).
std::vector<MrcModel::Entry> registeredOrder(CtlClient& client, const json& plans,
                                             FileTable& files) {
  std::vector<std::vector<MrcModel::Entry>> perRank;
  for (const json& p : plans) {
    std::vector<MrcModel::Entry> entries;
    json offset = p.value("start", uint64_t{0});
    while (!offset.is_null()) {
      json page =
          client.call({{"cmd", admin::kCmdPlanEntries}, {"rank", p["rank"]}, {"offset", offset}});
      for (const json& e : page["entries"]) {
        entries.push_back(
            {files.index(std::to_string(e[0].get<uint64_t>()), e[1].get<uint64_t>(), e[0]),
             e[2].get<uint64_t>(), e[3].get<uint64_t>()});
      }
      offset = page["next_offset"];
    }
    perRank.push_back(std::move(entries));
  }
  std::vector<MrcModel::Entry> out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (const auto& r : perRank) {
      if (i < r.size()) out.push_back(r[i]), any = true;
    }
    if (!any) break;
  }
  return out;
}

json ratiosJson(const MrcModel::Ratios& r) { return {{"all", r.all}, {"warm", r.warm}}; }

}  // namespace

json runMrc(CtlClient& client, const MrcOptions& o) {
  const json info = client.call({{"cmd", admin::kCmdPlans}});
  const uint32_t chunkSize = o.chunkSize ? o.chunkSize : info.value("chunk_size", 1u << 20);
  FileTable files;
  std::vector<std::vector<MrcModel::Entry>> orders;
  std::string source;
  if (!o.orderFiles.empty()) {
    source = "files";
    for (const auto& f : o.orderFiles)
      orders.push_back(readOrderFile(f, client.mountpoint(), files));
  } else {
    if (info["plans"].empty()) {
      throw CtlError(
          "no order registered with this mount (epochctl order ...); or give --order FILE");
    }
    source = "registered";
    orders.push_back(registeredOrder(client, info["plans"], files));
  }
  const unsigned epochs =
      o.epochs ? o.epochs : std::max<unsigned>(2, static_cast<unsigned>(orders.size()));
  // The RAM tier's constants as this daemon has them (absent: an older one).
  RamTierShape shape;
  const json tier = info.value("ram_tier", json::object());
  shape.maxShards = tier.value("max_shards", shape.maxShards);
  shape.minShardBytes = tier.value("min_shard_bytes", shape.minShardBytes);
  shape.victimScan = tier.value("victim_scan", shape.victimScan);
  MrcModel model(chunkSize, files.sizes(), shape);
  size_t entries = 0;
  for (unsigned e = 0; e < epochs; ++e) {
    if (e < orders.size()) {
      model.addEpoch(orders[e]);
      entries += orders[e].size();
    } else {
      std::vector<MrcModel::Entry> next = orders.back();
      std::mt19937_64 rng(o.seed + e);
      std::shuffle(next.begin(), next.end(), rng);
      model.addEpoch(next);
      entries += next.size();
    }
  }
  const uint64_t unique = model.uniqueBytes();
  std::vector<uint64_t> sizes = o.sizes;
  if (sizes.empty()) {
    const unsigned n = std::max(1u, o.points);
    for (unsigned k = 1; k <= n; ++k) sizes.push_back(unique * k / n);
    const uint64_t ram = info.value("ram_capacity_bytes", uint64_t{0});
    if (ram > 0 && ram < unique) sizes.push_back(ram);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  // Sharded sizes use the mount's own partition of chunks into shards.
  std::string partition = "unsharded";
  if (!sizes.empty() && model.shardsFor(sizes.back()) > 1) {
    partition = loadMountShards(client, files, model) ? "mount" : "model_hash";
  }
  json points = json::array();
  for (const auto& p : model.run(sizes)) {
    points.push_back({{"cache_bytes", p.cacheBytes},
                      {"shards", p.shards},
                      {"lru", ratiosJson(p.lru)},
                      {"order_aware", ratiosJson(p.orderAware)},
                      {"belady", ratiosJson(p.belady)}});
  }
  return {{"source", source},
          {"chunk_size", chunkSize},
          {"epochs", epochs},
          {"orders_given", orders.size()},
          {"entries", entries},
          {"accesses", model.accesses()},
          {"accessed_bytes", model.accessedBytes()},
          {"unique_bytes", unique},
          {"ram_capacity_bytes", info.value("ram_capacity_bytes", uint64_t{0})},
          {"shard_partition", partition},
          {"points", points}};
}

std::string formatMrc(const json& r) {
  std::ostringstream o;
  const bool warm = r.value("epochs", 1) > 1;
  const char* key = warm ? "warm" : "all";
  o << "miss-ratio curve of " << r.value("epochs", 0) << " epochs (" << r.value("orders_given", 0)
    << " order(s) " << (r.value("source", "") == "files" ? "given" : "registered")
    << (r.value("epochs", 0) > r.value("orders_given", 0) ? ", later epochs reshuffled" : "")
    << "), " << r.value("entries", 0) << " entries, "
    << humanBytes(r.value("unique_bytes", uint64_t{0})) << " distinct, chunk "
    << humanBytes(r.value("chunk_size", uint64_t{0})) << "\n"
    << "byte hit ratio " << (warm ? "after the first epoch" : "over the epoch")
    << " (kernel page cache and prefetch not modelled)\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "%12s %9s %12s %9s\n", "cache", "LRU", "order-aware", "Belady");
  o << buf;
  const uint64_t ram = r.value("ram_capacity_bytes", uint64_t{0});
  for (const json& p : r["points"]) {
    const uint64_t c = p.value("cache_bytes", uint64_t{0});
    std::snprintf(buf, sizeof buf, "%12s %8.1f%% %11.1f%% %8.1f%%%s\n", humanBytes(c).c_str(),
                  100.0 * p["lru"].value(key, 0.0), 100.0 * p["order_aware"].value(key, 0.0),
                  100.0 * p["belady"].value(key, 0.0),
                  c == ram ? "   <- this mount's RAM tier" : "");
    o << buf;
  }
  return o.str();
}

void drawMrcPng(const json& r, const std::string& file) {
  static const char* kScript = R"PY(
import json, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.stderr.write("matplotlib is not installed (apt-get install python3-matplotlib)\n")
    sys.exit(3)
d = json.load(open(sys.argv[1]))
key = "warm" if d["epochs"] > 1 else "all"
pts = d["points"]
big = max(p["cache_bytes"] for p in pts)
unit, div = ("GiB", 2**30) if big >= 2**30 else ("MiB", 2**20)
xs = [p["cache_bytes"] / div for p in pts]
fig, ax = plt.subplots(figsize=(7, 4.5))
for name, label in (("lru", "LRU"), ("order_aware", "order-aware (epochfs)"), ("belady", "Belady (clairvoyant)")):
    ax.plot(xs, [100 * p[name][key] for p in pts], marker="o", label=label)
if d.get("ram_capacity_bytes") and d["ram_capacity_bytes"] <= 1.2 * big:
    ax.axvline(d["ram_capacity_bytes"] / div, color="grey", linestyle="--", label="this mount's RAM tier")
ax.set_xlabel("cache size (%s)" % unit)
ax.set_ylabel("byte hit ratio (%%, %s)" % ("after the first epoch" if key == "warm" else "one epoch"))
ax.set_ylim(0, 100)
ax.set_xlim(0, None)
ax.grid(True, alpha=0.3)
ax.set_title("epochfs miss-ratio curve: %d epochs, %.1f %s distinct" % (d["epochs"], d["unique_bytes"] / div, unit))
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
)PY";
  char dir[] = "/tmp/epochctl-mrc-XXXXXX";
  if (mkdtemp(dir) == nullptr) throw CtlError("cannot create a temporary directory");
  const std::string data = std::string(dir) + "/mrc.json", script = std::string(dir) + "/plot.py";
  std::ofstream(data) << r.dump();
  std::ofstream(script) << kScript;
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/usr/bin/python3", "python3", script.c_str(), data.c_str(), file.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  unlink(data.c_str());
  unlink(script.c_str());
  rmdir(dir);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw CtlError(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127
                       ? "--png needs /usr/bin/python3 with matplotlib"
                       : "--png: drawing " + file + " failed");
  }
}

}  // namespace epochfs::ctl
