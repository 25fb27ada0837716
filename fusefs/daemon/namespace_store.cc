#include "fusefs/daemon/namespace_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "fusefs/namespace_image.h"

namespace epochfs::fusefs {

using cache::Status;

Status NamespaceStore::save(const DatasetNamespace& ns) const {
  const std::string tmp = path() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::fromErrno(errno, "write " + tmp);
  if (Status s = NamespaceImage::encodeTo(fd, ns); !s.isOk()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s.withContext(tmp);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path().c_str()) != 0) {
    const int e = synced ? errno : err;
    ::unlink(tmp.c_str());
    return Status::fromErrno(e, "keep " + path());
  }
  return Status::ok();
}

cache::Result<DatasetNamespace> NamespaceStore::load(int64_t* keptAt) const {
  const int fd = ::open(path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::fromErrno(errno, "read " + path());
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::fromErrno(err, "read " + path());
  }
  // Read in pieces, never whole (a 10-million-file image is over a gigabyte).
  auto decoded = NamespaceImage::decodeFile(fd);
  ::close(fd);
  if (!decoded.isOk()) return decoded.status();
  if (keptAt != nullptr) *keptAt = st.st_mtim.tv_sec;
  return std::move(decoded->ns);
}

}  // namespace epochfs::fusefs
