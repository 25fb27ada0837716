// DatasetNamespace: the snapshot of the source tree taken at mount (a
// parallel walk of a directory, or built from a listing's entries, e.g. an
// object store's keys: fusefs/object_tree.h), served from memory so lookups
// and readdir never touch the source. Inode numbers are node indexes + 1 (the
// root is FUSE_ROOT_ID = 1), numbered breadth-first in name order, so the same
// tree gets the same numbers in every process (a restarted daemon serves the
// node ids the kernel holds). Nodes are never removed, so an inode stays valid
// for the mount's lifetime (FUSE forget is a no-op). Attributes may change
// (--revalidate, refresh): readers copy them out under a striped lock (attr(),
// setAttr()).
//
// A refresh may graft entries the source gained (graft()): they get the next
// inode numbers (so a grown namespace is no longer numbered canonically) and
// their directory a new, merged child list. Readers never wait for it: grown
// nodes live in a SegmentedArray that never moves them, a node count stored
// with release publishes them, and each replaced child list is kept for the
// namespace's lifetime, so references returned by children() and path() stay
// valid.
#pragma once

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cache/file_identity.h"
#include "cache/status.h"
#include "fusefs/segmented_array.h"

namespace epochfs::fusefs {

struct NodeAttr {
  uint32_t mode = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 1;
  uint64_t size = 0;
  uint64_t sourceIno = 0;
  uint64_t rdev = 0;
  int64_t atimeNs = 0;
  int64_t mtimeNs = 0;
  int64_t ctimeNs = 0;
  bool gone = false;  // deleted from the source (seen in --revalidate mode)
};

// One file (or explicit directory) of a listing, for DatasetNamespace::fromEntries.
struct NamespaceEntry {
  std::string path;  // relative, '/'-separated, no leading '/', no empty, "." or ".." component
  NodeAttr attr;     // mode says file or directory
};

class DatasetNamespace {
 public:
  using Ino = uint64_t;
  static constexpr Ino kRootIno = 1;

  // Walks the directory open at `rootFd` with `threads` threads.
  static cache::Result<DatasetNamespace> snapshot(int rootFd, unsigned threads);
  // Builds the tree from `entries`, in any order (one thread). Parent directories
  // that are not listed, and the root, get `dirAttr`. The numbering is snapshot()'s
  // (the same tree gets the same numbers). Defensive, never fatal: a malformed path
  // is skipped; of two entries with the same path the first wins, except that a
  // directory beats a file (the file could not hold the directory's entries);
  // each kind is logged once. The fingerprint is snapshot()'s plus each
  // non-directory's sourceIno (a listing's version hash, e.g. of the ETag).
  static cache::Result<DatasetNamespace> fromEntries(std::vector<NamespaceEntry> entries,
                                                     const NodeAttr& dirAttr);

  bool valid(Ino ino) const { return ino >= 1 && ino <= nodeCount(); }
  // The child `name` of directory `parent`, or 0.
  Ino lookup(Ino parent, std::string_view name) const;
  Ino parentOf(Ino ino) const { return node(ino).parent; }
  // Inode numbers sorted by name (directories only).
  const std::vector<uint32_t>& children(Ino dir) const;
  // Path relative to the source root ("" for the root).
  const std::string& path(Ino ino) const { return node(ino).path; }
  std::string_view name(Ino ino) const;
  const std::string& symlinkTarget(Ino ino) const { return node(ino).target; }
  uint64_t fileId(Ino ino) const { return node(ino).fileId; }

  NodeAttr attr(Ino ino) const;
  // Also updates the counts when the entry goes, comes back or is resized.
  void setAttr(Ino ino, const NodeAttr& a);
  // The version identity of a regular file, from its current attributes.
  cache::FileIdentity identity(Ino ino) const;
  // Fills a struct stat for FUSE replies (st_ino = our inode number).
  void fillStat(Ino ino, struct stat* st) const;

  size_t nodeCount() const {
    return nodes_.size() + growth_->count.load(std::memory_order_acquire);
  }
  // What the namespace holds now: entries gone, back, resized (setAttr) and
  // grafted count. The root is not counted.
  uint64_t fileCount() const { return files_ + growth_->files.load(std::memory_order_relaxed); }
  uint64_t dirCount() const { return dirs_ + growth_->dirs.load(std::memory_order_relaxed); }
  uint64_t totalBytes() const { return bytes_ + growth_->bytes.load(std::memory_order_relaxed); }

  // Adds `fresh`'s entries `from` (children of one of its directories, sorted
  // by name; each with its subtree) to live directory `parent`. A live child
  // of the same name must be gone (replaced by another kind of entry): the new
  // entry takes its place in the child list. Returns the regular files added.
  // One graft at a time (the refresher's); readers run on.
  cache::Result<uint64_t> graft(Ino parent, const DatasetNamespace& fresh,
                                const std::vector<Ino>& from);
  // Holds off graft() while the caller reads the whole namespace.
  std::unique_lock<std::mutex> holdGrowth() const {
    return std::unique_lock<std::mutex>(growth_->mu);
  }
  // False once a graft added entries (here, or in the worker that handed
  // this namespace over): the numbering is then no longer breadth-first.
  bool numberedBreadthFirst() const {
    return !grafted_ && growth_->count.load(std::memory_order_acquire) == 0;
  }
  // Hash, taken at the snapshot, of every path in inode order with its mode,
  // size, mtime, ctime and symlink target (and, built from a listing, each
  // file's sourceIno): equal fingerprints mean the same numbering of the same
  // versions (what a restarted daemon must find).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  struct Node {
    uint32_t parent = 0;
    uint32_t nameOffset = 0;  // where the name starts in path
    std::string path;
    std::string target;              // symlinks only
    std::vector<uint32_t> children;  // inode numbers, sorted by name (dirs only)
    uint64_t fileId = 0;
    NodeAttr attr;
  };
  class Walker;
  class EntryBuilder;           // fromEntries()
  friend class NamespaceImage;  // decode() builds one from its nodes (namespace_image.h)
  // Renumbers the nodes breadth-first in name order (the walk's threads
  // append them in whatever order they finish); nodes no child list reaches
  // are dropped.
  void renumberCanonically();
  // `withVersions`: also hash each non-directory's sourceIno (listings only:
  // a POSIX walk's fingerprint leaves inode numbers out).
  uint64_t computeFingerprint(bool withVersions) const;

  // What graft() added, and the counts' changes since the snapshot (each
  // wraps around to a decrease); behind a pointer so the namespace stays movable.
  struct Growth {
    SegmentedArray<Node> nodes;    // inode nodes_.size() + 1 + i at i
    std::atomic<size_t> count{0};  // grown nodes published
    // A replaced child list by inode - 1 (null: the node's own).
    SegmentedArray<std::atomic<const std::vector<uint32_t>*>> childLists;
    std::vector<std::unique_ptr<std::vector<uint32_t>>> kept;  // every list published
    std::atomic<uint64_t> files{0}, dirs{0}, bytes{0};
    std::mutex mu;  // one graft at a time
  };

  DatasetNamespace() = default;
  std::mutex& stripe(Ino ino) const { return (*stripes_)[ino % stripes_->size()]; }
  const Node& node(Ino ino) const {
    return ino <= nodes_.size() ? nodes_[ino - 1] : *growth_->nodes.find(ino - 1 - nodes_.size());
  }
  Node& mutableNode(Ino ino) { return const_cast<Node&>(node(ino)); }

  std::vector<Node> nodes_;  // the snapshot's nodes (inode i at i - 1)
  std::unique_ptr<Growth> growth_ = std::make_unique<Growth>();
  std::unique_ptr<std::array<std::mutex, 64>> stripes_ =
      std::make_unique<std::array<std::mutex, 64>>();  // guard Node::attr
  uint64_t files_ = 0, dirs_ = 0, bytes_ = 0;
  bool grafted_ = false;  // nodes_ holds grafted entries (a decoded image's)
  uint64_t fingerprint_ = 0;
};

NodeAttr attrFromStat(const struct stat& st);

}  // namespace epochfs::fusefs
