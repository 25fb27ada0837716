// ObjectTree: turns an object store's listing (S3 keys) into the entries a
// DatasetNamespace is built from (DatasetNamespace::fromEntries). Directories
// come from the '/'s in the keys; a key ending in '/' is an explicit directory
// marker. Keys that cannot be a path are skipped and counted by kind:
//   collisions       a key `a` beside keys under `a/`: the directory wins
//   emptyComponents  `a//b`, a leading '/'
//   dotComponents    a component "." or ".."
//   longNames        a component longer than 255 bytes (NAME_MAX)
//   outsidePrefix    a key that does not start with the prefix
// Pure functions: no state, no locks; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fusefs/dataset_namespace.h"

namespace epochfs::fusefs {

struct ObjectRecord {
  std::string key;
  uint64_t size = 0;
  int64_t mtimeNs = 0;
  uint64_t versionHash = 0;  // a hash of the ETag: becomes the node's sourceIno
};

struct ObjectTreeSkips {
  uint64_t collisions = 0, emptyComponents = 0, dotComponents = 0, longNames = 0, outsidePrefix = 0;
  // The first skipped key of each kind (for the log).
  std::string collisionExample, emptyComponentExample, dotComponentExample, longNameExample,
      outsidePrefixExample;
  uint64_t total() const;
};

struct ObjectTree {
  std::vector<NamespaceEntry> entries;  // every file and every directory, in no particular order
  NodeAttr rootAttr;                    // for fromEntries' dirAttr: the root's (and a directory's)
  ObjectTreeSkips skips;
};

// `prefix`: "" or ending in '/' (one is added if missing), removed from every
// key; the prefix itself as a key is ignored. uid/gid: the mounting user's.
// Files: S_IFREG|0444, nlink 1, the object's size, atime = mtime = ctime =
// mtimeNs, sourceIno = versionHash (a changed ETag changes the FileIdentity).
// Directories: S_IFDIR|0555, nlink 2, size 0, times the newest mtime of any
// object below them (an explicit marker's own included), or 0. Linear in the
// number of keys (a hash map of the directory paths), for millions of keys.
ObjectTree objectTreeFromKeys(const std::vector<ObjectRecord>& objects, std::string_view prefix,
                              uint32_t uid, uint32_t gid);

// One spdlog::warn per kind of skip that happened: the count and an example
// key. `source` names the listing (e.g. "s3://bucket/prefix/").
void logSkips(const ObjectTreeSkips& skips, std::string_view source);

}  // namespace epochfs::fusefs
