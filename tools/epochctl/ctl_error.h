// CtlError: an error for the user, one line, and the exit status epochctl
// ends with (docs/ADMIN.md's table). The admin client library's errors map
// onto it in ctl_client.h.
#pragma once

#include <stdexcept>
#include <string>

namespace epochfs::ctl {

class CtlError : public std::runtime_error {
 public:
  static constexpr int kFailed = 1;    // the command failed (daemon said why)
  static constexpr int kNoDaemon = 3;  // not an epochfs mount / daemon not responding
  static constexpr int kDenied = 4;    // permission denied
  CtlError(const std::string& message, int exitCode = kFailed)
      : std::runtime_error(message), exitCode_(exitCode) {}
  int exitCode() const { return exitCode_; }

 private:
  int exitCode_;
};

}  // namespace epochfs::ctl
