// FuseReply: the answer to one FUSE request, the seam between FuseServer and
// the kernel. FuseServer's handlers reply only through it; LibfuseReply
// (libfuse_reply.h) sends the reply to the kernel with libfuse's fuse_reply_*,
// and the unit tests (tests/unit/fusefs/fuse_server_test.cc) record it.
// Exactly one reply method (err .. iov) is called per request; the direntry
// helpers only pack entries into a caller's buffer for a later buf() and may
// be called any number of times before it. The read path stays copy-free:
// iov() hands over the cached chunks' bytes as they are.
// Thread-safety: one object per request, used by the thread serving it.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cstddef>

namespace epochfs::fusefs {

class FuseReply {
 public:
  virtual ~FuseReply() = default;

  // Each reply returns 0, or -errno when it could not be sent (libfuse's
  // convention; e.g. the request was interrupted).
  virtual int err(int errnum) = 0;  // 0: success without data (release)
  virtual int entry(const fuse_entry_param& e) = 0;
  virtual int attr(const struct stat& st, double timeoutSeconds) = 0;
  virtual int readlink(const char* target) = 0;
  virtual int open(const fuse_file_info& fi) = 0;  // open and opendir
  virtual int buf(const char* data, size_t size) = 0;
  virtual int iov(const iovec* pieces, int count) = 0;  // read data, not copied
  virtual int statfs(const struct statvfs& sv) = 0;
  virtual int xattr(size_t size) = 0;  // the size a getxattr/listxattr needs

  // Packs one readdir entry (kernel format) at `out` if `room` holds it;
  // returns the entry's size either way (more than `room`: nothing written).
  // `nextOffset` is the offset a later readdir resumes from.
  virtual size_t addDirentry(char* out, size_t room, const char* name, const struct stat& st,
                             off_t nextOffset) = 0;
  virtual size_t addDirentryPlus(char* out, size_t room, const char* name,
                                 const fuse_entry_param& e, off_t nextOffset) = 0;
};

}  // namespace epochfs::fusefs
