#include "fusefs/to_errno.h"

#include <cerrno>

namespace epochfs::fusefs {

int toErrno(const cache::Status& s) {
  using Code = cache::Status::Code;
  switch (s.code()) {
    case Code::kOk:
      return 0;
    case Code::kNotFound:
      return ENOENT;
    case Code::kPermissionDenied:
      return EACCES;
    case Code::kInvalidArgument:
      return EINVAL;
    case Code::kReadOnly:
      return EROFS;
    case Code::kNoSpace:
      return ENOSPC;
    case Code::kTimedOut:
      return ETIMEDOUT;
    case Code::kTooLarge:
      return EFBIG;
    // A file that changed under an immutable mount, a corrupt chunk that could
    // not be re-read, an unavailable tier: the reader sees an I/O error, never
    // wrong bytes.
    case Code::kStale:
    case Code::kCorruption:
    case Code::kUnavailable:
    case Code::kIoError:
      return EIO;
  }
  return EIO;
}

}  // namespace epochfs::fusefs
