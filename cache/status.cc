#include "cache/status.h"

#include <cstring>

namespace epochfs::cache {

Status Status::fromErrno(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status(Code::kNotFound, std::move(m));
    case EACCES:
    case EPERM:
      return Status(Code::kPermissionDenied, std::move(m));
    case EROFS:
      return Status(Code::kReadOnly, std::move(m));
    case ENOSPC:
    case EDQUOT:
      return Status(Code::kNoSpace, std::move(m));
    case EINVAL:
      return Status(Code::kInvalidArgument, std::move(m));
    case ETIMEDOUT:
      return Status(Code::kTimedOut, std::move(m));
    case EFBIG:
    case E2BIG:
      return Status(Code::kTooLarge, std::move(m));
    case ESTALE:
      return Status(Code::kStale, std::move(m));
    default:
      return Status(Code::kIoError, std::move(m));
  }
}

std::string Status::toString() const {
  static const char* const kNames[] = {"OK",          "NotFound",   "PermissionDenied",
                                       "IoError",     "Corruption", "InvalidArgument",
                                       "ReadOnly",    "NoSpace",    "Stale",
                                       "Unavailable", "TimedOut",   "TooLarge"};
  std::string s = kNames[static_cast<int>(code_)];
  if (!message_.empty()) s += ": " + message_;
  return s;
}

}  // namespace epochfs::cache
