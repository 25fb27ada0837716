#include "fusefs/daemon/mountpoint_check.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fusefs/mount_table.h"

namespace epochfs::fusefs {

using cache::Status;

Status checkMountable(const MountOptions& o) {
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    return Status::unavailable("/dev/fuse is not available (is the fuse module loaded?)");
  }
  for (const MountEntry& m : MountTable::read()) {
    if (m.mountPoint == o.mountpoint) {
      return Status::unavailable("mountpoint " + o.mountpoint + " is already mounted");
    }
  }
  if (!o.nonempty) {
    DIR* d = opendir(o.mountpoint.c_str());
    if (d == nullptr) return Status::fromErrno(errno, "cannot open mountpoint " + o.mountpoint);
    bool empty = true;
    while (struct dirent* de = readdir(d)) {
      if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) empty = false;
    }
    closedir(d);
    if (!empty) {
      return Status::invalidArgument("mountpoint " + o.mountpoint +
                                     " is not empty (use -o nonempty to mount over it)");
    }
  }
  return Status::ok();
}

}  // namespace epochfs::fusefs
