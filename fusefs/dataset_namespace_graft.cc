// DatasetNamespace::graft(): entries a refresh found in the source, added to
// the live namespace while FUSE requests read it (dataset_namespace.h says how
// readers stay safe).
#include <sys/stat.h>

#include <cstdint>
#include <utility>

#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

Result<uint64_t> DatasetNamespace::graft(Ino parent, const DatasetNamespace& fresh,
                                         const std::vector<Ino>& from) {
  Growth& g = *growth_;
  cache::MutexLock lock(g.mu);
  if (from.empty()) return uint64_t{0};
  const Ino first = nodeCount() + 1;
  // Breadth-first over the fresh subtrees, as (fresh inode, live parent): the
  // entry at queue index i becomes inode first + i, so a new directory's
  // children are the range its children take in the queue. The new nodes are
  // written before the count publishes them: no reader reaches them until then.
  std::vector<std::pair<Ino, Ino>> queue;
  queue.reserve(from.size());
  for (Ino f : from) queue.emplace_back(f, parent);
  std::vector<uint32_t> added;  // the live inodes of `from`, in name order
  uint64_t files = 0, dirs = 0, bytes = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto [f, p] = queue[i];
    const Ino ino = first + i;
    if (ino >= UINT32_MAX) return Status::tooLarge("more than 4 billion entries");
    NodeAttr a = fresh.attr(f);
    a.gone = false;
    Result<Node> made = makeNode(fresh.name(f), a, fresh.symlinkTarget(f));
    if (!made.isOk()) return made.status();
    made->parent = static_cast<uint32_t>(p);
    if (p == parent) added.push_back(static_cast<uint32_t>(ino));
    if (S_ISDIR(a.mode)) {
      ++dirs;
      const ChildList kids = fresh.children(f);
      if (!kids.empty()) made->value = uint64_t{kids.size()} << 32 | (first + queue.size());
      for (uint32_t c : kids) queue.emplace_back(c, ino);
    } else if (S_ISREG(a.mode)) {
      ++files;
      bytes += a.size;
    }
    nodes_->at(ino - 1) = *made;
  }
  growth_->count.store(first - 1 + queue.size(), std::memory_order_release);
  g.files.fetch_add(files, std::memory_order_relaxed);
  g.dirs.fetch_add(dirs, std::memory_order_relaxed);
  g.bytes.fetch_add(bytes, std::memory_order_relaxed);

  // The parent's new child list: both lists are sorted by name; a new entry
  // replaces a (gone) live one of the same name.
  const ChildList old = children(parent);
  auto merged = std::make_unique<std::vector<uint32_t>>();
  merged->reserve(old.size() + added.size());
  size_t i = 0, j = 0;
  while (i < old.size() || j < added.size()) {
    const int cmp = i == old.size()     ? 1
                    : j == added.size() ? -1
                                        : name(old[i]).compare(name(added[j]));
    if (cmp < 0) {
      merged->push_back(old[i++]);
    } else {
      if (cmp == 0) ++i;
      merged->push_back(added[j++]);
    }
  }
  g.makeChildLists().at(parent - 1).store(merged.get(), std::memory_order_release);
  g.kept.push_back(std::move(merged));  // readers may still hold the old list
  return files;
}

}  // namespace epochfs::fusefs
