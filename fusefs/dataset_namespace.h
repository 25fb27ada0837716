// DatasetNamespace: the snapshot of the source tree taken at mount (a
// parallel walk of a directory, or built from a listing's entries, e.g. an
// object store's keys: fusefs/object_tree.h), served from memory so lookups
// and readdir never touch the source. Inode numbers are node indexes + 1 (the
// root is FUSE_ROOT_ID = 1), numbered breadth-first in name order, so the same
// tree gets the same numbers in every process (a restarted daemon serves the
// node ids the kernel holds). Nodes are never removed, so an inode stays valid
// for the mount's lifetime (FUSE forget is a no-op). Attributes may change in
// --revalidate mode: readers copy them out under a striped lock (attr(), setAttr()).
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

  bool valid(Ino ino) const { return ino >= 1 && ino <= nodes_.size(); }
  // The child `name` of directory `parent`, or 0.
  Ino lookup(Ino parent, std::string_view name) const;
  Ino parentOf(Ino ino) const { return nodes_[ino - 1].parent; }
  const std::vector<uint32_t>& children(Ino dir) const { return nodes_[dir - 1].children; }
  // Path relative to the source root ("" for the root).
  const std::string& path(Ino ino) const { return nodes_[ino - 1].path; }
  std::string_view name(Ino ino) const;
  const std::string& symlinkTarget(Ino ino) const { return nodes_[ino - 1].target; }
  uint64_t fileId(Ino ino) const { return nodes_[ino - 1].fileId; }

  NodeAttr attr(Ino ino) const;
  void setAttr(Ino ino, const NodeAttr& a);
  // The version identity of a regular file, from its current attributes.
  cache::FileIdentity identity(Ino ino) const;
  // Fills a struct stat for FUSE replies (st_ino = our inode number).
  void fillStat(Ino ino, struct stat* st) const;

  size_t nodeCount() const { return nodes_.size(); }
  uint64_t fileCount() const { return files_; }
  uint64_t dirCount() const { return dirs_; }
  uint64_t totalBytes() const { return bytes_; }
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

  DatasetNamespace() = default;
  std::mutex& stripe(Ino ino) const { return (*stripes_)[ino % stripes_->size()]; }

  std::vector<Node> nodes_;
  std::unique_ptr<std::array<std::mutex, 64>> stripes_ =
      std::make_unique<std::array<std::mutex, 64>>();  // guard Node::attr
  uint64_t files_ = 0, dirs_ = 0, bytes_ = 0;
  uint64_t fingerprint_ = 0;
};

NodeAttr attrFromStat(const struct stat& st);

}  // namespace epochfs::fusefs
