// PlanBuilder: assembles an AccessPlan from a streamed `order` (admin
// messages order_begin, order_append..., order_commit on one connection).
// Entries are paths relative to the mount, optionally with a byte range
// "path@OFFSET+LENGTH", or objects {"path"|"b64": ..., "offset": N, "length": N}.
// Every entry is resolved in the snapshot as it arrives; the first bad one
// fails the whole order with a message naming it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cache/status.h"
#include "fusefs/dataset_namespace.h"
#include "prefetch/access_plan.h"

namespace epochfs::fusefs {

class PlanBuilder {
 public:
  PlanBuilder(const DatasetNamespace& ns, int64_t epoch, int rank, uint64_t start,
              uint64_t maxEntries);

  cache::Status append(const nlohmann::json& entries);
  size_t size() const { return entries_.size(); }
  // The plan, for the job (mount) `job` (prefetch::AccessPlan::job).
  std::shared_ptr<const prefetch::AccessPlan> build(uint32_t job = 0);

 private:
  cache::Result<prefetch::PlanEntry> resolve(const nlohmann::json& entry) const;

  const DatasetNamespace& ns_;
  int64_t epoch_;
  int rank_;
  uint64_t start_;
  uint64_t maxEntries_;
  std::vector<prefetch::PlanEntry> entries_;
};

}  // namespace epochfs::fusefs
