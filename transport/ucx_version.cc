#include "transport/ucx_version.h"

#include <ucp/api/ucp.h>

namespace epochfs::transport {

std::string ucxVersion() { return ucp_get_version_string(); }

}  // namespace epochfs::transport
