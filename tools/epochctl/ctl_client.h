// CtlClient: epochctl's view of the admin client library
// (tools/admin_client/client.h): the same connection, with every failure
// thrown as a CtlError whose exit status says its kind (3: unreachable,
// 4: denied, 1: anything else).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tools/admin_client/client.h"
#include "tools/admin_client/result.h"
#include "tools/epochctl/ctl_error.h"

namespace epochfs::ctl {

// The CtlError for a library error.
CtlError toCtlError(const admin::Error& error);

// The value of `result`, or its error thrown as a CtlError.
template <typename T>
T valueOrThrow(admin::Result<T> result) {
  if (!result) throw toCtlError(result.error());
  return std::move(*result);
}

class CtlClient {
 public:
  static constexpr double kDefaultTimeoutSeconds = admin::Client::kDefaultTimeoutSeconds;

  // Connects to the daemon serving `mountpoint` (or to `socketPath` if not
  // empty); throws CtlError ("not an epochfs mount", "daemon not responding", ...).
  explicit CtlClient(const std::string& mountpoint, const std::string& socketPath = "")
      : client_(valueOrThrow(admin::Client::connect(mountpoint, socketPath))) {}

  // The reply to `request`; throws CtlError on transport errors and on
  // {"ok": false} replies (with the daemon's message).
  nlohmann::json call(const nlohmann::json& request,
                      double timeoutSeconds = kDefaultTimeoutSeconds) {
    return valueOrThrow(client_.call(request, timeoutSeconds));
  }

  admin::Client& client() { return client_; }
  const std::string& mountpoint() const { return client_.mountpoint(); }
  const std::string& socketPath() const { return client_.socketPath(); }

 private:
  admin::Client client_;
};

}  // namespace epochfs::ctl
