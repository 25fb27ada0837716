// FileIdentity: which version of which source file some bytes belong to.
// A file's version is (path, size, mtime, ctime, inode) — DESIGN.md. The path
// is folded into fileId (XXH3 of the path relative to the source root), so the
// identity is stable across remounts and the disk tier survives a restart.
#pragma once

#include <cstdint>
#include <string_view>

namespace epochfs::cache {

struct FileIdentity {
  uint64_t fileId = 0;  // XXH3-64 of the relative path
  uint64_t size = 0;
  int64_t mtimeNs = 0;
  int64_t ctimeNs = 0;
  uint64_t inode = 0;

  bool operator==(const FileIdentity&) const = default;
};

// XXH3-64 of a relative path (no leading '/'); the file id.
uint64_t fileIdForPath(std::string_view relPath);

// XXH3-64 of the canonical absolute source path: the dataset id.
uint64_t datasetIdForPath(std::string_view absSourcePath);

}  // namespace epochfs::cache
