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
  std::lock_guard<std::mutex> lock(g.mu);
  if (from.empty()) return uint64_t{0};
  const size_t base = nodes_.size();
  const Ino first = nodeCount() + 1;
  Ino next = first;
  // Breadth-first over the fresh subtrees, as (fresh inode, live parent). The
  // new nodes are written before the count publishes them: no reader reaches
  // them until then.
  std::vector<std::pair<Ino, Ino>> queue;
  queue.reserve(from.size());
  for (Ino f : from) queue.emplace_back(f, parent);
  std::vector<uint32_t> added;  // the live inodes of `from`, in name order
  uint64_t files = 0, dirs = 0, bytes = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto [f, p] = queue[i];
    if (next >= UINT32_MAX) return Status::tooLarge("more than 4 billion entries");
    const Ino ino = next++;
    Node& n = g.nodes.at(ino - 1 - base);
    n = Node{};  // a graft that failed may have written it
    n.parent = static_cast<uint32_t>(p);
    n.path = fresh.path(f);
    n.nameOffset = static_cast<uint32_t>(n.path.size() - fresh.name(f).size());
    n.target = fresh.symlinkTarget(f);
    n.fileId = fresh.fileId(f);
    n.attr = fresh.attr(f);
    n.attr.gone = false;
    if (p == parent) {
      added.push_back(static_cast<uint32_t>(ino));
    } else {
      mutableNode(p).children.push_back(static_cast<uint32_t>(ino));  // p is new too
    }
    if (S_ISDIR(n.attr.mode)) {
      ++dirs;
      for (uint32_t c : fresh.children(f)) queue.emplace_back(c, ino);
    } else if (S_ISREG(n.attr.mode)) {
      ++files;
      bytes += n.attr.size;
    }
  }
  g.count.store(next - 1 - base, std::memory_order_release);
  g.files.fetch_add(files, std::memory_order_relaxed);
  g.dirs.fetch_add(dirs, std::memory_order_relaxed);
  g.bytes.fetch_add(bytes, std::memory_order_relaxed);

  // The parent's new child list: both lists are sorted by name; a new entry
  // replaces a (gone) live one of the same name.
  const std::vector<uint32_t>& old = children(parent);
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
  g.childLists.at(parent - 1).store(merged.get(), std::memory_order_release);
  g.kept.push_back(std::move(merged));  // readers may still hold the old list
  return files;
}

}  // namespace epochfs::fusefs
