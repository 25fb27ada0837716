// libfuse's own messages (its fuse_log) go to our log (spdlog: syslog, the
// --log-file or stderr with -f), not to the user's terminal: errors as
// errors, the rest as debug. Call once, after the logger is set up.
#pragma once

namespace epochfs::fusefs {

void routeLibfuseLog();

}  // namespace epochfs::fusefs
