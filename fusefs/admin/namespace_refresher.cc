#include "fusefs/admin/namespace_refresher.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace epochfs::fusefs {

using Ino = DatasetNamespace::Ino;

NamespaceRefresher::NamespaceRefresher(DatasetNamespace& live, cache::ChunkCache& cache,
                                       Snapshot snapshot, Changed changed)
    : live_(live), cache_(cache), snapshot_(std::move(snapshot)), changed_(std::move(changed)) {}

void NamespaceRefresher::list(std::vector<std::string>& v, const std::string& path,
                              RefreshReport& r) {
  if (v.size() < kMaxListed) {
    v.push_back(path);
  } else {
    r.truncated = true;
  }
}

uint64_t NamespaceRefresher::subtreeSize(const DatasetNamespace& ns, Ino ino) {
  uint64_t n = 0;
  std::vector<Ino> stack = {ino};
  while (!stack.empty()) {
    const Ino cur = stack.back();
    stack.pop_back();
    if (ns.attr(cur).gone) continue;
    ++n;
    if (S_ISDIR(ns.attr(cur).mode)) {
      for (uint32_t c : ns.children(cur)) stack.push_back(c);
    }
  }
  return n;
}

void NamespaceRefresher::markGone(Ino ino, RefreshReport& r) {
  std::vector<Ino> stack = {ino};
  while (!stack.empty()) {
    const Ino cur = stack.back();
    stack.pop_back();
    NodeAttr a = live_.attr(cur);
    if (a.gone) continue;
    if (S_ISREG(a.mode)) {
      cache_.invalidate(live_.identity(cur));
      ++r.invalidatedFiles;
    }
    a.gone = true;
    live_.setAttr(cur, a);
    touched_ = true;
    ++r.removed;
    if (S_ISDIR(a.mode)) {
      for (uint32_t c : live_.children(cur)) stack.push_back(c);
    }
  }
}

void NamespaceRefresher::compareDirs(const DatasetNamespace& fresh, Ino oldDir, Ino newDir,
                                     RefreshReport& r) {
  const auto& olds = live_.children(oldDir);
  const auto& news = fresh.children(newDir);
  std::vector<Ino> added;     // entries of `newDir` the live directory lacks, in name order
  uint64_t addedEntries = 0;  // in their subtrees
  bool entriesChanged = false;
  size_t i = 0, j = 0;
  while (i < olds.size() || j < news.size()) {
    const int cmp = i == olds.size()   ? 1
                    : j == news.size() ? -1
                                       : live_.name(olds[i]).compare(fresh.name(news[j]));
    if (cmp < 0) {  // only in the live tree: removed from the source
      const Ino o = olds[i++];
      if (!live_.attr(o).gone) {
        list(r.removedPaths, live_.path(o), r);
        r.goneEntries.emplace_back(oldDir, live_.name(o));
        entriesChanged = true;
        markGone(o, r);
      }
      continue;
    }
    if (cmp > 0) {  // only in the source: added
      const Ino n = news[j++];
      addedEntries += subtreeSize(fresh, n);
      list(r.addedPaths, fresh.path(n), r);
      added.push_back(n);
      continue;
    }
    const Ino o = olds[i++], n = news[j++];
    const NodeAttr oa = live_.attr(o);
    const NodeAttr na = fresh.attr(n);
    const bool sameType = (oa.mode & S_IFMT) == (na.mode & S_IFMT) &&
                          (!S_ISLNK(na.mode) || live_.symlinkTarget(o) == fresh.symlinkTarget(n));
    if (!sameType) {  // replaced by another kind of entry: the old one is gone
      if (!oa.gone) {
        list(r.removedPaths, live_.path(o), r);
        markGone(o, r);
      }
      r.goneEntries.emplace_back(oldDir, live_.name(o));  // the name will be a new inode
      addedEntries += subtreeSize(fresh, n);
      list(r.addedPaths, fresh.path(n), r);
      added.push_back(n);
      continue;
    }
    const bool content = oa.size != na.size || oa.mtimeNs != na.mtimeNs ||
                         oa.ctimeNs != na.ctimeNs || oa.sourceIno != na.sourceIno;
    const bool access = oa.mode != na.mode || oa.uid != na.uid || oa.gid != na.gid;
    if (oa.gone) entriesChanged = true;  // back in the source
    if (oa.gone || content || access) {
      if (S_ISREG(oa.mode) && !oa.gone && content) {
        cache_.invalidate(live_.identity(o));
        ++r.invalidatedFiles;
      }
      live_.setAttr(o, na);  // na.gone is false
      touched_ = true;
      if (!S_ISDIR(na.mode)) r.staleInodes.push_back(o);
      // A directory's times change with its entries: only its own mode/owner
      // (or its return) counts as a change.
      if (!S_ISDIR(na.mode) || access || oa.gone) {
        ++r.changed;
        list(r.changedPaths, live_.path(o), r);
      }
    }
    if (S_ISDIR(na.mode)) compareDirs(fresh, o, n, r);
  }
  if (entriesChanged || !added.empty()) r.staleInodes.push_back(oldDir);
  if (added.empty()) return;
  r.added += addedEntries;
  auto files = live_.graft(oldDir, fresh, added);
  if (!files.isOk()) {  // nothing of this directory's additions was added
    spdlog::warn("refresh: cannot add {} entries under '{}': {}", addedEntries, live_.path(oldDir),
                 files.status().message());
    r.notAdded += addedEntries;
    return;
  }
  touched_ = true;
  r.addedFiles += *files;
}

cache::Result<RefreshReport> NamespaceRefresher::refresh() {
  cache::MutexLock lock(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  if (!snapshot_) return cache::Status::invalidArgument("this mount cannot re-snapshot its source");
  auto fresh = snapshot_();
  if (!fresh.isOk()) return fresh.status();
  RefreshReport r;
  // The root itself: only its attributes can change.
  const NodeAttr oa = live_.attr(DatasetNamespace::kRootIno);
  const NodeAttr na = fresh->attr(DatasetNamespace::kRootIno);
  if (oa.mode != na.mode || oa.uid != na.uid || oa.gid != na.gid) {
    ++r.changed;
    list(r.changedPaths, ".", r);
  }
  touched_ = oa.mode != na.mode || oa.uid != na.uid || oa.gid != na.gid || oa.size != na.size ||
             oa.mtimeNs != na.mtimeNs || oa.ctimeNs != na.ctimeNs || oa.sourceIno != na.sourceIno;
  live_.setAttr(DatasetNamespace::kRootIno, na);
  compareDirs(*fresh, DatasetNamespace::kRootIno, DatasetNamespace::kRootIno, r);
  // A new version when something changed since the last refresh (additions
  // that could not be added stay pending, so only a different count is news).
  if (r.removed + r.changed + (r.added - r.notAdded) > 0 || r.notAdded != pending_.load()) {
    version_.fetch_add(1);
  }
  refreshes_.fetch_add(1);
  pending_.store(r.notAdded);
  r.version = version_.load();
  if (touched_ && changed_) changed_(r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("refresh: version {}: {} added, {} removed, {} changed", r.version,
               r.added - r.notAdded, r.removed, r.changed);
  return r;
}

}  // namespace epochfs::fusefs
