// checkMountable: whether a mount can be made at the options' mountpoint,
// checked before anything starts (main.cc), so a refusal is one line and
// nothing is half-made.
// Thread-safety: a free function; reads /dev/fuse, mountinfo and the directory.
#pragma once

#include "cache/status.h"
#include "fusefs/daemon/mount_options.h"

namespace epochfs::fusefs {

// Refuses a mount that cannot work, with a one-line reason: no /dev/fuse, the
// mountpoint already mounted, or not empty (unless options.nonempty).
cache::Status checkMountable(const MountOptions& options);

}  // namespace epochfs::fusefs
