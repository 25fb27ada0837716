#include "fusefs/version_info.h"

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cstdint>

#include "fusefs/fuse_init_replay.h"
#include "transport/ucx_version.h"

namespace epochfs::fusefs {

std::string libfuseVersion() { return fuse_pkgversion(); }

std::string versionText() {
  std::string text = std::string("epochfs ") + kEpochfsVersion + "\n";
  text += std::string("libfuse ") + fuse_pkgversion();
  // Offered the highest minor, libfuse answers with its own.
  if (const uint32_t minor = FuseInitReplay::libfuseMinor(UINT32_MAX); minor != 0) {
    text += " (FUSE protocol 7." + std::to_string(minor) + ")";
  }
  text += "\nUCX " + transport::ucxVersion() + "\n";
  return text;
}

}  // namespace epochfs::fusefs
