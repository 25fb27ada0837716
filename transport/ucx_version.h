// The version of the UCX library this process runs with (for --version and
// status; UCX stays inside transport/).
#pragma once

#include <string>

namespace epochfs::transport {

std::string ucxVersion();

}  // namespace epochfs::transport
