#include "fusefs/admin/residency.h"

#include <algorithm>
#include <vector>

#include "fusefs/admin/admin_paths.h"

namespace epochfs::fusefs {

using nlohmann::json;

void ResidencyTotals::add(const ResidencyTotals& o) {
  files += o.files;
  bytes += o.bytes;
  chunks += o.chunks;
  ramChunks += o.ramChunks;
  ramBytes += o.ramBytes;
  diskChunks += o.diskChunks;
  diskBytes += o.diskBytes;
  cachedChunks += o.cachedChunks;
  cachedBytes += o.cachedBytes;
  skippedDirs += o.skippedDirs;
}

void Residency::addFile(DatasetNamespace::Ino ino, ResidencyTotals& t) const {
  const NodeAttr a = ns_.attr(ino);
  const uint64_t fileId = ns_.fileId(ino);
  const uint32_t cs = cache_.chunkSize();
  const uint32_t n = cache_.chunkCount(a.size);
  ++t.files;
  t.bytes += a.size;
  t.chunks += n;
  const cache::ChunkStore& ram = cache_.ram();
  const cache::ChunkStore* disk = cache_.disk();
  for (uint32_t i = 0; i < n; ++i) {
    const cache::ChunkKey key = cache_.keyFor(fileId, i);
    const uint64_t bytes = std::min<uint64_t>(cs, a.size - uint64_t{i} * cs);
    const bool inRam = ram.contains(key);
    const bool onDisk = disk != nullptr && disk->contains(key);
    if (inRam) ++t.ramChunks, t.ramBytes += bytes;
    if (onDisk) ++t.diskChunks, t.diskBytes += bytes;
    if (inRam || onDisk) ++t.cachedChunks, t.cachedBytes += bytes;
  }
}

ResidencyTotals Residency::of(DatasetNamespace::Ino ino, const DirFilter& mayDescend) const {
  ResidencyTotals t;
  std::vector<DatasetNamespace::Ino> stack = {ino};
  while (!stack.empty()) {
    const auto cur = stack.back();
    stack.pop_back();
    const NodeAttr a = ns_.attr(cur);
    if (a.gone) continue;
    if (S_ISREG(a.mode)) {
      addFile(cur, t);
    } else if (S_ISDIR(a.mode)) {
      if (mayDescend && !mayDescend(cur)) {
        ++t.skippedDirs;
        continue;
      }
      for (uint32_t child : ns_.children(cur)) stack.push_back(child);
    }
  }
  return t;
}

json Residency::toJson(DatasetNamespace::Ino ino, const ResidencyTotals& t) const {
  const NodeAttr a = ns_.attr(ino);
  const char* type = S_ISREG(a.mode)   ? "file"
                     : S_ISDIR(a.mode) ? "dir"
                     : S_ISLNK(a.mode) ? "symlink"
                                       : "other";
  auto pct = [&](uint64_t part) {
    if (t.bytes == 0) return t.files > 0 ? 100.0 : 0.0;  // empty files are fully cached
    return static_cast<double>(static_cast<int64_t>(10000.0 * static_cast<double>(part) /
                                                    static_cast<double>(t.bytes))) /
           100.0;
  };
  const std::string& path = ns_.path(ino);
  json j = {{"path", path.empty() ? json(".") : encodeAdminPath(path)},
            {"type", type},
            {"files", t.files},
            {"bytes", t.bytes},
            {"chunks", t.chunks},
            {"ram_bytes", t.ramBytes},
            {"disk_bytes", t.diskBytes},
            {"peer_bytes", nullptr},
            {"cached_bytes", t.cachedBytes},
            {"not_cached_bytes", t.bytes - t.cachedBytes},
            {"cached_chunks", t.cachedChunks},
            {"ram_pct", pct(t.ramBytes)},
            {"disk_pct", pct(t.diskBytes)},
            {"cached_pct", pct(t.cachedBytes)}};
  if (t.skippedDirs > 0) j["unreadable_dirs"] = t.skippedDirs;
  return j;
}

}  // namespace epochfs::fusefs
