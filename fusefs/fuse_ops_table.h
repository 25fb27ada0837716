// The libfuse low-level operations table of FuseServer: each callback finds
// its FuseServer in the request's userdata and calls its on*() method;
// writes are refused read-only (EROFS) and forgets answered at once. The
// handlers reply through a LibfuseReply (libfuse_reply.h) made per request.
#pragma once

#include "fusefs/fuse_server.h"  // FUSE_USE_VERSION, then <fuse_lowlevel.h>

namespace epochfs::fusefs {

const fuse_lowlevel_ops& fuseServerOps();

}  // namespace epochfs::fusefs
