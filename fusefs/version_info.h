// What `epochfs --version` prints: this build's version (EPOCHFS_VERSION, set
// once in CMakeLists.txt) and the versions of the libfuse and UCX libraries
// the binary runs with, with the highest FUSE protocol that libfuse speaks.
#pragma once

#include <string>

namespace epochfs::fusefs {

inline constexpr const char* kEpochfsVersion = EPOCHFS_VERSION;

std::string versionText();
// The libfuse the process runs with ("3.14.0").
std::string libfuseVersion();

}  // namespace epochfs::fusefs
