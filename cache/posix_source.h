// PosixSource: the Source for any POSIX directory (local, NFS, Lustre, GPFS).
// Each read opens the file relative to the root (openat, O_NOFOLLOW, O_DIRECT
// where the filesystem allows it), checks
// the open file's identity against the snapshot's, preads and closes: a file
// replaced or changed since the snapshot yields kStale, never other bytes.
// readChunk reads chunks of 64 KiB and more straight into a page-aligned
// ChunkBuffer; smaller reads and read() go through an aligned bounce buffer.
// Thread-safe (the scratch pool locks; nothing else changes after construction).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "cache/scratch_pool.h"
#include "cache/source.h"

namespace epochfs::cache {

class PosixSource : public Source {
 public:
  // Opens `root` (must be a directory).
  static Result<std::unique_ptr<PosixSource>> open(const std::string& root);
  ~PosixSource() override;

  Result<size_t> read(const std::string& relPath, const FileIdentity& expected, uint64_t offset,
                      char* buf, size_t len) override;
  Result<ChunkBuffer> readChunk(const std::string& relPath, const FileIdentity& expected,
                                uint64_t offset, size_t len) override;
  Result<struct ::stat> lstat(const std::string& relPath) override;

  int rootFd() const { return rootFd_; }

 private:
  explicit PosixSource(int rootFd) : rootFd_(rootFd) {}
  // Opens relPath (O_DIRECT if `direct`) and checks it is still `expected`.
  // When the filesystem refuses O_DIRECT it clears directIo_ and fails.
  Result<int> openChecked(const std::string& relPath, const FileIdentity& expected, bool direct);
  bool useDirect(uint64_t offset) const;
  int rootFd_;
  std::atomic<bool> directIo_{true};  // cleared when the filesystem refuses O_DIRECT
  // Aligned bounce buffers for O_DIRECT (4 KiB alignment); 4 kept idle.
  ScratchPool scratch_{4096, 4};
};

// The identity of an lstat/fstat result (fileId filled from relPath).
FileIdentity identityOf(const std::string& relPath, const struct ::stat& st);

}  // namespace epochfs::cache
