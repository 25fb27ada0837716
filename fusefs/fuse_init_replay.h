// FuseInitReplay: the FUSE_INIT handshake of a worker under the supervisor
// (fusefs/daemon/supervisor.h). The first worker keeps the kernel's FUSE_INIT message
// while libfuse answers it; a restarted worker feeds the same message to its
// own libfuse session (so libfuse negotiates the same connection) under a
// request id the kernel does not know, which makes the kernel drop the reply,
// then asks the kernel to re-queue what the dead worker had read.
// Thread-safety: call before the session loop starts.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <string>

#include "cache/status.h"

namespace epochfs::fusefs {

class FuseInitReplay {
 public:
  // Reads the kernel's FUSE_INIT from the session's descriptor, lets libfuse
  // answer it, and returns the raw message.
  static cache::Result<std::string> receive(fuse_session* se);
  // Processes `message` (a kept FUSE_INIT) again in a fresh session.
  static cache::Status replay(fuse_session* se, const std::string& message);
  // FUSE_NOTIFY_RESEND (kernel >= 6.9): requests read but not answered by a
  // previous worker go back in the queue. False if the kernel refused it.
  static bool requeueUnanswered(fuse_session* se);
  // The FUSE protocol minor version libfuse answers a FUSE_INIT of protocol
  // 7.`kernelMinor` with (compiled into libfuse, not exported): a throwaway
  // session answers a synthetic FUSE_INIT into memory. The connection speaks
  // the lower of the two. 0 if the probe failed.
  static uint32_t libfuseMinor(uint32_t kernelMinor);
};

}  // namespace epochfs::fusefs
