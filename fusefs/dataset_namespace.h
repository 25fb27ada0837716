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
// Memory: 48 bytes a node plus its name (docs/PERFORMANCE.md "Daemon memory
// and mount time"). A node holds its parent's index, not its path (path() walks up);
// breadth-first numbering makes a directory's children one contiguous range
// of inodes (no child vectors); owners are an index into a table of the
// (uid, gid) pairs seen; names and symlink targets are packed in a NameArena;
// the walk renumbers in place. A node serves what a read-only mount needs:
// atime is served as mtime, nlink as 1 (the link count of a snapshot's entry
// says nothing: directories' 1 is btrfs's "not counted"), a directory's size
// as 4096.
//
// A refresh may graft entries the source gained (graft()): they get the next
// inode numbers (so a grown namespace is no longer numbered canonically) and
// their directory a new, merged child list. Readers never wait for it: nodes
// live in a SegmentedArray that never moves them, a node count stored with
// release publishes them, and each replaced child list is kept for the
// namespace's lifetime.
#pragma once

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/file_identity.h"
#include "cache/mutex.h"
#include "cache/status.h"
#include "fusefs/chunked_array.h"
#include "fusefs/name_arena.h"
#include "fusefs/segmented_array.h"

namespace epochfs::fusefs {

// The attributes of an entry, as attr() returns them and setAttr() takes them.
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
  struct WalkOptions {
    unsigned threads = 16;
    // Set to the entries made so far as the walk goes (read by another thread).
    std::atomic<uint64_t>* progress = nullptr;
    // TEST-ONLY: a pause before each directory is listed (a slow walk to kill).
    std::chrono::milliseconds directoryDelay{0};
  };
  static cache::Result<DatasetNamespace> snapshot(int rootFd, const WalkOptions& options);
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
  // A directory's children: inode numbers sorted by name (empty for others).
  class ChildList;
  ChildList children(Ino dir) const;
  // Path relative to the source root ("" for the root), built from the names
  // up to the root.
  std::string path(Ino ino) const;
  // Valid for the namespace's lifetime.
  std::string_view name(Ino ino) const;
  std::string_view symlinkTarget(Ino ino) const;
  // The cache's id of the file: a hash of its path (cache::fileIdForPath).
  uint64_t fileId(Ino ino) const;

  NodeAttr attr(Ino ino) const;
  // Also updates the counts when the entry goes, comes back or is resized.
  void setAttr(Ino ino, const NodeAttr& a);
  // The version identity of a regular file, from its current attributes.
  cache::FileIdentity identity(Ino ino) const;
  // Fills a struct stat for FUSE replies (st_ino = our inode number).
  void fillStat(Ino ino, struct stat* st) const;

  size_t nodeCount() const { return growth_->count.load(std::memory_order_acquire); }
  // Bytes the nodes, names and owner table take.
  uint64_t memoryBytes() const;
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
  // A std::unique_lock (to be returned): the analysis does not see it, and
  // the holder reads nothing guarded by growth_->mu.
  std::unique_lock<cache::Mutex> holdGrowth() const {
    return std::unique_lock<cache::Mutex>(growth_->mu);
  }
  // False once a graft added entries (here, or in the worker that handed
  // this namespace over): the numbering is then no longer breadth-first.
  bool numberedBreadthFirst() const { return !grafted_ && nodeCount() == snapshotCount_; }
  // Hash, taken at the snapshot, of every path in inode order with its mode,
  // size, mtime, ctime and symlink target (and, built from a listing, each
  // file's sourceIno): equal fingerprints mean the same numbering of the same
  // versions (what a restarted daemon must find).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  // 48 bytes; what attr() returns is rebuilt from it. Trivial (no member
  // initializers), so the unused part of a chunk of nodes is never touched:
  // make one with Node{}.
  struct Node {
    uint32_t parent;
    uint32_t nameOffset;  // in names_: the name, then a symlink's target
    uint16_t nameLength;
    uint16_t mode;   // st_mode fits 16 bits
    uint16_t owner;  // index in owners_
    uint8_t gone;    // deleted from the source (seen in --revalidate mode)
    uint8_t kind;    // kOther, kDir or kSymlink: set once (read without the stripe)
    // Regular file: its size. Directory: first child | child count << 32.
    // Symlink: the target's length. Device: rdev.
    uint64_t value;
    uint64_t sourceIno;
    int64_t mtimeNs;
    int64_t ctimeNs;
  };
  static_assert(sizeof(Node) == 48);
  enum Kind : uint8_t { kOther = 0, kDir = 1, kSymlink = 2 };
  struct Owner {
    uint32_t uid, gid;
  };
  // Segments of 1,024 nodes, then doubling: a small namespace stays small,
  // and a segment's unused tail is never touched (Node is trivial).
  using Nodes = SegmentedArray<Node, /*kValueInit=*/false>;
  using Owners = ChunkedArray<Owner, 10, 64>;  // 65,536 owner pairs
  class Walker;
  class EntryBuilder;           // fromEntries()
  friend class NamespaceImage;  // decode() builds one from its nodes (namespace_image.h)

  // The node for a new entry (its name stored, its owner interned); the
  // caller sets parent and, for a directory, its child range.
  cache::Result<Node> makeNode(std::string_view name, const NodeAttr& a, std::string_view target);
  cache::Result<uint16_t> ownerIndex(uint32_t uid, uint32_t gid);
  // Renumbers the first `count` nodes breadth-first in name order, in place
  // (the walk's threads append directories' entries in whatever order they
  // finish); nodes no child range reaches are dropped.
  void renumberCanonically(size_t count);
  // `withVersions`: also hash each non-directory's sourceIno (listings only:
  // a POSIX walk's fingerprint leaves inode numbers out).
  uint64_t computeFingerprint(bool withVersions) const;
  void countEntries();  // files_, dirs_, bytes_ from the nodes

  // The node count, and what graft() changed: the replaced child lists and
  // the counts' changes since the snapshot (each wraps around to a decrease); behind a pointer so
  // the namespace stays movable.
  struct Growth {
    // A replaced child list by inode - 1 (null: the node's range); the table
    // is made at the first replacement (null until then: most namespaces
    // never have one).
    using ChildLists = ChunkedArray<std::atomic<const std::vector<uint32_t>*>, 16, 65536>;
    std::atomic<ChildLists*> childLists{nullptr};
    std::unique_ptr<ChildLists> childListsOwner;
    ChildLists& makeChildLists() {  // with mu held, or before the namespace is shared
      if (!childListsOwner) {
        childListsOwner = std::make_unique<ChildLists>();
        childLists.store(childListsOwner.get(), std::memory_order_release);
      }
      return *childListsOwner;
    }
    std::vector<std::unique_ptr<std::vector<uint32_t>>> kept;  // every list published
    std::atomic<uint64_t> files{0}, dirs{0}, bytes{0};
    std::atomic<size_t> count{0};  // nodes published, the snapshot's included
    // One graft at a time. kept and childListsOwner are changed by graft()
    // with it held, or by a decode before the namespace is shared: not
    // annotated.
    cache::Mutex mu;
  };

  DatasetNamespace() = default;
  cache::Mutex& stripe(Ino ino) const { return (*stripes_)[ino % stripes_->size()]; }
  const Node& node(Ino ino) const { return (*nodes_)[ino - 1]; }
  Node& mutableNode(Ino ino) { return (*nodes_)[ino - 1]; }
  NodeAttr attrOf(const Node& n) const;  // with the node's stripe held
  // Sets the attributes `a` carries (not the name, kind or a directory's or
  // symlink's `value`).
  static void store(Node& n, const NodeAttr& a, uint16_t owner);

  std::unique_ptr<Nodes> nodes_ = std::make_unique<Nodes>();  // inode i at i - 1
  std::unique_ptr<NameArena> names_ = std::make_unique<NameArena>();
  std::unique_ptr<Owners> owners_ = std::make_unique<Owners>();
  // Interning owners (the walk, a graft and setAttr may add one).
  std::unique_ptr<cache::Mutex> ownersMu_ = std::make_unique<cache::Mutex>();
  std::unique_ptr<std::unordered_map<uint64_t, uint16_t>> ownerIds_ PT_GUARDED_BY(*ownersMu_) =
      std::make_unique<std::unordered_map<uint64_t, uint16_t>>();
  size_t snapshotCount_ = 0;  // of which the snapshot's (the rest grafted)
  std::unique_ptr<Growth> growth_ = std::make_unique<Growth>();
  // Guard nodes' attributes, stripe(ino) for inode ino: a lock chosen by
  // index, which the analysis cannot name, so the nodes are not annotated.
  std::unique_ptr<std::array<cache::Mutex, 64>> stripes_ =
      std::make_unique<std::array<cache::Mutex, 64>>();
  uint64_t files_ = 0, dirs_ = 0, bytes_ = 0;
  bool grafted_ = false;  // the snapshot's nodes hold grafted entries (a decoded image's)
  uint64_t fingerprint_ = 0;
};

// A directory's children, as the range breadth-first numbering gives or a
// list a graft made. Valid for the namespace's lifetime.
class DatasetNamespace::ChildList {
 public:
  class Iterator {
   public:
    Iterator(const ChildList* l, size_t i) : list_(l), i_(i) {}
    uint32_t operator*() const { return (*list_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }

   private:
    const ChildList* list_;
    size_t i_;
  };
  ChildList() = default;
  ChildList(uint32_t first, uint32_t count) : first_(first), count_(count) {}
  explicit ChildList(const std::vector<uint32_t>* list)
      : list_(list), count_(static_cast<uint32_t>(list->size())) {}
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  uint32_t operator[](size_t i) const {
    return list_ != nullptr ? (*list_)[i] : first_ + static_cast<uint32_t>(i);
  }
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, count_); }
  std::vector<uint32_t> toVector() const {
    std::vector<uint32_t> v;
    v.reserve(count_);
    for (uint32_t kid : *this) v.push_back(kid);
    return v;
  }

 private:
  const std::vector<uint32_t>* list_ = nullptr;
  uint32_t first_ = 0, count_ = 0;
};

NodeAttr attrFromStat(const struct stat& st);

}  // namespace epochfs::fusefs
