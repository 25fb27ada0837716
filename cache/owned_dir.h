// OwnedDir: opening and locking the disk tier's own directory (moved out of
// DiskTier so that it can reopen a directory removed at run time).
#pragma once

#include <string>

#include "cache/status.h"

namespace epochfs::cache {

class OwnedDir {
 public:
  // Opens `dir` (creating it 0700 if missing; never following a symlink) and
  // checks that the effective uid owns it. Returns the directory descriptor;
  // kPermissionDenied if another uid owns it, kInvalidArgument if it is not a
  // directory.
  static Result<int> open(const std::string& dir);
  // Takes `dir`'s LOCK file (flock, released by the kernel if we die) and
  // writes our pid into it. kUnavailable if another process holds it.
  static Result<int> lock(int dirFd, const std::string& dir);
};

}  // namespace epochfs::cache
