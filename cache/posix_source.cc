#include "cache/posix_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace epochfs::cache {

FileIdentity identityOf(const std::string& relPath, const struct ::stat& st) {
  FileIdentity id;
  id.fileId = fileIdForPath(relPath);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctimeNs = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  id.inode = st.st_ino;
  return id;
}

Result<std::unique_ptr<PosixSource>> PosixSource::open(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::fromErrno(errno, "cannot open source " + root);
  return std::unique_ptr<PosixSource>(new PosixSource(fd));
}

PosixSource::~PosixSource() { ::close(rootFd_); }

namespace {

constexpr size_t kDirectAlign = ChunkBuffer::kPageBytes;
// Chunks at least this large are read O_DIRECT into their own page-aligned
// buffer (at most 1/16 of slack for the rounding up to a page).
constexpr size_t kDirectIntoChunkBytes = 64 * 1024;

// pread until `len` bytes or end of file.
Result<size_t> preadAll(int fd, const std::string& relPath, uint64_t offset, char* buf,
                        size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::fromErrno(errno, "read " + relPath);
    if (n == 0) break;
    done += static_cast<size_t>(n);
    if (done % kDirectAlign != 0) break;  // short O_DIRECT read: end of file
  }
  return done;
}

}  // namespace

Result<int> PosixSource::openChecked(const std::string& relPath, const FileIdentity& expected,
                                     bool direct) {
  int fd = ::openat(rootFd_, relPath.c_str(),
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0 && direct && errno == EINVAL) {
    directIo_.store(false);  // this filesystem has no O_DIRECT
    return Status::invalidArgument("no O_DIRECT");
  }
  if (fd < 0) return Status::fromErrno(errno, "open " + relPath);
  struct ::stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::fromErrno(err, "fstat " + relPath);
  }
  if (!(identityOf(relPath, st) == expected)) {
    ::close(fd);
    return Status::stale(relPath + " changed since the snapshot");
  }
  return fd;
}

bool PosixSource::useDirect(uint64_t offset) const {
  // O_DIRECT where the filesystem has it: the bytes go from the device into
  // our buffer without a second copy in the source's page cache (the cache
  // tiers keep them), which halves the CPU a cold epoch costs.
  return directIo_.load(std::memory_order_relaxed) && offset % kDirectAlign == 0;
}

Result<size_t> PosixSource::read(const std::string& relPath, const FileIdentity& expected,
                                 uint64_t offset, char* buf, size_t len) {
  const bool direct = useDirect(offset);
  Result<int> fd = openChecked(relPath, expected, direct);
  if (!fd.isOk() && direct && !directIo_.load()) return read(relPath, expected, offset, buf, len);
  if (!fd.isOk()) return fd.status();
  Result<size_t> r = Status::ok();
  if (direct) {
    // `buf` need not be aligned: an aligned bounce buffer from the shared
    // pool (bounded, not per thread).
    const size_t want = (len + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    ScratchPool::Lease scratch = scratch_.acquire(want);
    r = scratch.data() != nullptr ? preadAll(*fd, relPath, offset, scratch.data(), want)
                                  : Result<size_t>(Status::ioError("out of memory"));
    if (r.isOk()) {
      *r = std::min(*r, len);
      std::memcpy(buf, scratch.data(), *r);
    } else if (r.status().code() == Status::Code::kInvalidArgument) {
      directIo_.store(false);  // O_DIRECT refused at read time (alignment rules)
      ::close(*fd);
      return read(relPath, expected, offset, buf, len);
    }
  } else {
    r = preadAll(*fd, relPath, offset, buf, len);
  }
  ::close(*fd);
  return r;
}

Result<ChunkBuffer> PosixSource::readChunk(const std::string& relPath, const FileIdentity& expected,
                                           uint64_t offset, size_t len) {
  // Small reads go through read()'s bounce buffer: a page-aligned buffer of
  // its own would waste up to a page on each.
  if (len < kDirectIntoChunkBytes || !useDirect(offset)) {
    return Source::readChunk(relPath, expected, offset, len);
  }
  Result<int> fd = openChecked(relPath, expected, true);
  if (!fd.isOk() && !directIo_.load()) return Source::readChunk(relPath, expected, offset, len);
  if (!fd.isOk()) return fd.status();
  // Straight from the device into the chunk: no bounce buffer, no copy, no
  // zero-fill (the read itself faults the fresh pages in).
  // The buffer may be a freed chunk's (chunk_buffer_pool.h): the read
  // overwrites every byte up to `len` (a short read shrinks the buffer to what
  // it read), so no old byte is served. Whole pages for O_DIRECT, but not the
  // size class's slack past them: that would read the next chunk's bytes.
  ChunkBuffer buf = ChunkBuffer::pageAligned(len);
  const size_t want = (len + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  Result<size_t> r = preadAll(*fd, relPath, offset, buf.data(), want);
  ::close(*fd);
  if (!r.isOk() && r.status().code() == Status::Code::kInvalidArgument) {
    directIo_.store(false);  // O_DIRECT refused at read time (alignment rules)
    return Source::readChunk(relPath, expected, offset, len);
  }
  if (!r.isOk()) return r.status();
  buf.resize(std::min(*r, len));
  return buf;
}

Result<struct ::stat> PosixSource::lstat(const std::string& relPath) {
  struct ::stat st;
  if (::fstatat(rootFd_, relPath.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::fromErrno(errno, "stat " + relPath);
  }
  return st;
}

}  // namespace epochfs::cache
