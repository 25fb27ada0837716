// DatasetNamespace::fromEntries(): the namespace of a listing (an object
// store's keys), in any order.
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <unordered_map>

#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

using cache::Result;
using cache::Status;

namespace {

struct ViewHash {
  size_t operator()(std::string_view s) const { return XXH3_64bits(s.data(), s.size()); }
};

// Relative, '/'-separated, no empty, "." or ".." component, none longer than
// a node's name may be.
bool wellFormedPath(std::string_view p) {
  if (p.empty()) return false;
  for (size_t start = 0;;) {
    const size_t slash = p.find('/', start);
    const std::string_view c =
        p.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (c.empty() || c == "." || c == ".." || c.size() > UINT16_MAX) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string_view lastComponent(std::string_view p) {
  const size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

}  // namespace

// Builds a tree of entries (directories found, or created with the default
// attributes, through a map from path to entry), sorts every child list by
// name without duplicates, then makes the nodes breadth-first: the canonical
// numbering, each directory's children one range. Names are views into the
// listing's paths, which outlive the builder.
class DatasetNamespace::EntryBuilder {
 public:
  EntryBuilder(DatasetNamespace& ns, const NodeAttr& dirAttr) : ns_(ns), dirAttr_(dirAttr) {}

  Status run(const std::vector<NamespaceEntry>& entries) {
    entries_ = &entries;
    tree_.push_back(TreeEntry{kNone, kNone, {}, {}, true, true});  // the root
    dirs_.emplace(std::string_view(), 0);
    for (uint32_t i = 0; i < entries.size(); ++i) {
      // A path adds at most one entry per component (at most half its bytes).
      if (tree_.size() + entries[i].path.size() / 2 + 2 >= UINT32_MAX) {
        return Status::tooLarge("more than 4 billion entries");
      }
      add(i);
    }
    dropDuplicates();
    if (malformed_ > 0) {
      spdlog::warn("namespace: skipped {} malformed path(s), e.g. '{}'", malformed_,
                   malformedExample_);
    }
    if (duplicates_ > 0) {
      spdlog::warn("namespace: skipped {} duplicate path(s), e.g. '{}'", duplicates_,
                   duplicateExample_);
    }
    return makeNodes();
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct TreeEntry {
    uint32_t parent;  // index in tree_
    uint32_t entry;   // index in the listing, or kNone (a directory made for a path)
    std::string_view name;
    std::vector<uint32_t> kids;  // indexes in tree_
    bool dir;
    bool listed;  // attributes from the listing
  };

  void add(uint32_t i) {
    const NamespaceEntry& e = (*entries_)[i];
    const std::string_view path = e.path;
    if (!wellFormedPath(path)) {
      if (malformed_++ == 0) malformedExample_ = e.path;
      return;
    }
    const size_t slash = path.rfind('/');
    const std::string_view parentPath =
        slash == std::string_view::npos ? "" : path.substr(0, slash);
    const bool isDir = S_ISDIR(e.attr.mode);
    if (isDir) {
      if (auto it = dirs_.find(path); it != dirs_.end()) {
        // Made as some path's parent: the listing's attributes replace the
        // defaults; listed twice: the first wins.
        TreeEntry& d = tree_[it->second];
        if (!d.listed) {
          d.entry = i;
          d.listed = true;
        } else if (duplicates_++ == 0) {
          duplicateExample_ = e.path;
        }
        return;
      }
    }
    const uint32_t parent = dir(parentPath);
    const uint32_t at = addEntry(parent, i, lastComponent(path), isDir);
    if (isDir) {
      tree_[at].listed = true;
      dirs_.emplace(path, at);
    }
  }

  // The directory at `path`, made with its missing parents.
  uint32_t dir(std::string_view path) {
    if (auto it = dirs_.find(path); it != dirs_.end()) return it->second;
    const size_t slash = path.rfind('/');
    const uint32_t parent = dir(slash == std::string_view::npos ? "" : path.substr(0, slash));
    const uint32_t at = addEntry(parent, kNone, lastComponent(path), true);
    dirs_.emplace(path, at);
    return at;
  }

  uint32_t addEntry(uint32_t parent, uint32_t entry, std::string_view name, bool isDir) {
    tree_.push_back(TreeEntry{parent, entry, name, {}, isDir, false});
    const auto at = static_cast<uint32_t>(tree_.size() - 1);
    tree_[parent].kids.push_back(at);
    return at;
  }

  // Sorts every child list by name; of equal names a directory wins, then the
  // first added. Directories are unique (the map), so only files are dropped.
  void dropDuplicates() {
    for (TreeEntry& d : tree_) {
      auto& kids = d.kids;
      if (kids.size() < 2) continue;
      std::sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
        if (tree_[a].name != tree_[b].name) return tree_[a].name < tree_[b].name;
        if (tree_[a].dir != tree_[b].dir) return tree_[a].dir;
        return a < b;
      });
      auto last = std::unique(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
        if (tree_[a].name != tree_[b].name) return false;
        if (duplicates_++ == 0) duplicateExample_ = (*entries_)[tree_[b].entry].path;
        return true;
      });
      kids.erase(last, kids.end());
    }
  }

  // Breadth-first from the root: a directory's children get the next inodes.
  Status makeNodes() {
    std::vector<uint32_t> order = {0};  // inode - 1 -> index in tree_
    std::vector<uint32_t> inoOf(tree_.size(), 0);
    inoOf[0] = kRootIno;
    for (size_t i = 0; i < order.size(); ++i) {
      const TreeEntry& t = tree_[order[i]];
      NodeAttr a = t.entry == kNone ? dirAttr_ : (*entries_)[t.entry].attr;
      if (t.dir && !S_ISDIR(a.mode)) a.mode = S_IFDIR | (a.mode & 07777);
      Result<Node> made = ns_.makeNode(t.name, a, "");
      if (!made.isOk()) return made.status();
      made->parent = t.parent == kNone ? 0 : inoOf[t.parent];
      if (!t.kids.empty()) {
        made->value = uint64_t{t.kids.size()} << 32 | (order.size() + 1);
        for (uint32_t kid : t.kids) {
          order.push_back(kid);
          inoOf[kid] = static_cast<uint32_t>(order.size());
        }
      }
      ns_.nodes_->at(i) = *made;
    }
    ns_.growth_->count.store(order.size(), std::memory_order_release);
    ns_.snapshotCount_ = order.size();
    return Status::ok();
  }

  DatasetNamespace& ns_;
  const NodeAttr dirAttr_;
  const std::vector<NamespaceEntry>* entries_ = nullptr;
  std::vector<TreeEntry> tree_;
  std::unordered_map<std::string_view, uint32_t, ViewHash> dirs_;  // path -> index in tree_
  uint64_t malformed_ = 0, duplicates_ = 0;
  std::string malformedExample_, duplicateExample_;
};

Result<DatasetNamespace> DatasetNamespace::fromEntries(std::vector<NamespaceEntry> entries,
                                                       const NodeAttr& dirAttr) {
  DatasetNamespace ns;
  {
    EntryBuilder builder(ns, dirAttr);
    Status s = builder.run(entries);
    if (!s.isOk()) return s;
  }
  entries = {};
  ns.countEntries();
  ns.fingerprint_ = ns.computeFingerprint(/*withVersions=*/true);
  return ns;
}

}  // namespace epochfs::fusefs
