// OrderWriter: registers an epoch's read order (docs/PREFETCH.md) over one
// Client connection: order_begin, then the entries in order_append messages
// each under the protocol's message cap, then order_commit. An order of
// ImageNet is megabytes; it is never held whole here.
// Thread-safety: one writer per Client, used from one thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "tools/admin_client/client.h"
#include "tools/admin_client/entry_batch.h"
#include "tools/admin_client/result.h"

namespace epochfs::admin {

class OrderWriter {
 public:
  // How long order_commit may take (the daemon resolves every entry).
  static constexpr double kCommitTimeoutSeconds = 120;

  // `client` must outlive the writer; each message waits `timeoutSeconds`.
  explicit OrderWriter(Client& client, double timeoutSeconds = Client::kDefaultTimeoutSeconds)
      : client_(client), timeoutSeconds_(timeoutSeconds) {}

  // Starts the order of `epoch` for `rank`, whose first entry is entry `start`.
  Status begin(int64_t epoch, int rank, uint64_t start);
  // Adds one entry: a path relative to the mount as the protocol encodes it
  // (a string, or {"b64": ...}; optionally "path@OFFSET+LENGTH"). Sends a
  // batch when the next entry would not fit; kProtocol for an entry that
  // alone does not fit a message.
  Status append(const nlohmann::json& entry);
  // Sends what is left and commits; the daemon's reply ({"entries": N, ...}).
  Result<nlohmann::json> commit(double timeoutSeconds = kCommitTimeoutSeconds);

 private:
  Status flush();

  Client& client_;
  const double timeoutSeconds_;
  EntryBatch batch_;
};

}  // namespace epochfs::admin
