// Placeholder translation unit until the cluster issue lands: reports the UCX
// version the build links against (shown by `epochfs --version`).
#include <ucp/api/ucp.h>

namespace epochfs::transport {

const char* ucxVersionString() { return ucp_get_version_string(); }

}  // namespace epochfs::transport
