#include "tools/epochctl/ctl_client.h"

namespace epochfs::ctl {

CtlError toCtlError(const admin::Error& error) {
  switch (error.kind) {
    case admin::ErrorKind::kUnreachable:
      return CtlError(error.message, CtlError::kNoDaemon);
    case admin::ErrorKind::kDenied:
      return CtlError(error.message, CtlError::kDenied);
    case admin::ErrorKind::kRejected:
    case admin::ErrorKind::kProtocol:
      break;
  }
  return CtlError(error.message, CtlError::kFailed);
}

}  // namespace epochfs::ctl
