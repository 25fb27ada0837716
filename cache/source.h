// Source: where the dataset really lives (a POSIX directory on NFS, Lustre,
// GPFS, ...). The cache reads it only on a miss. Implementations must be
// thread-safe: many FUSE workers and prefetchers call read() at once.
#pragma once

#include <cstddef>
#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "cache/file_identity.h"
#include "cache/status.h"

namespace epochfs::cache {

class Source {
 public:
  virtual ~Source() = default;

  // Reads up to `len` bytes at `offset` of `relPath` (relative to the source
  // root) into `buf`; returns the byte count (short only at end of file).
  // Fails with kStale when the file is no longer the version `expected`
  // (size, mtime, ctime or inode differ), so another version's bytes are
  // never returned.
  virtual Result<size_t> read(const std::string& relPath, const FileIdentity& expected,
                              uint64_t offset, char* buf, size_t len) = 0;

  // lstat of `relPath` now (for --revalidate).
  virtual Result<struct ::stat> lstat(const std::string& relPath) = 0;
};

}  // namespace epochfs::cache
