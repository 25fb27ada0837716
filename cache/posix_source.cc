#include "cache/posix_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

Result<size_t> PosixSource::read(const std::string& relPath, const FileIdentity& expected,
                                 uint64_t offset, char* buf, size_t len) {
  int fd = ::openat(rootFd_, relPath.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::fromErrno(errno, "open " + relPath);
  struct ::stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::fromErrno(err, "fstat " + relPath);
  }
  FileIdentity now = identityOf(relPath, st);
  if (!(now == expected)) {
    ::close(fd);
    return Status::stale(relPath + " changed since the snapshot");
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Status::fromErrno(err, "read " + relPath);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done;
}

Result<struct ::stat> PosixSource::lstat(const std::string& relPath) {
  struct ::stat st;
  if (::fstatat(rootFd_, relPath.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::fromErrno(errno, "stat " + relPath);
  }
  return st;
}

}  // namespace epochfs::cache
