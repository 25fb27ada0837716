// Source: where the dataset really lives (a POSIX directory on NFS, Lustre,
// GPFS, ...). The cache reads it only on a miss. Implementations must be
// thread-safe: many FUSE workers and prefetchers call read() at once.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cache/chunk_buffer.h"
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

  // The `len` bytes at `offset` in a new buffer (what the cache calls on a
  // miss); fails with kStale as read() does, and returns fewer bytes only at
  // end of file. The default reads into a plain buffer; PosixSource reads
  // O_DIRECT straight into a page-aligned one.
  virtual Result<ChunkBuffer> readChunk(const std::string& relPath, const FileIdentity& expected,
                                        uint64_t offset, size_t len) {
    ChunkBuffer buf(len);
    Result<size_t> n = read(relPath, expected, offset, buf.data(), len);
    if (!n.isOk()) return n.status();
    buf.resize(*n);
    return buf;
  }

  // lstat of `relPath` now (for --revalidate).
  virtual Result<struct ::stat> lstat(const std::string& relPath) = 0;
};

}  // namespace epochfs::cache
