// ClusterCommands: the admin commands about the cluster — `peers` (the
// members, their state and counters) and `placement` (the owner node of every
// regular file, for the LocalityAwareSampler; a page per reply, under the
// message cap). Without a cluster, peers answers {"clustered": false} and
// placement names this node as every file's owner.
// Thread-safety: the handlers may run concurrently (Cluster is thread-safe).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "fusefs/admin/admin_auth.h"
#include "fusefs/admin/admin_server.h"
#include "fusefs/dataset_namespace.h"
#include "transport/cluster.h"

namespace epochfs::fusefs {

class ClusterCommands {
 public:
  // `cluster` null: not clustered. Both outlive this object's use.
  ClusterCommands(const DatasetNamespace& ns, const transport::Cluster* cluster,
                  const AdminAuth& auth)
      : ns_(ns), cluster_(cluster), auth_(auth) {}

  void registerAll(AdminServer& server);

  nlohmann::json peers() const;
  // Files [start, start + count) of the snapshot's regular files, in inode order.
  nlohmann::json placement(uint64_t start, uint64_t count) const;

 private:
  const DatasetNamespace& ns_;
  const transport::Cluster* cluster_;
  const AdminAuth& auth_;
};

}  // namespace epochfs::fusefs
