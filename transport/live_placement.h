// LivePlacement: who owns a file among the live members. Plain rendezvous
// over the live set until there are files; then the bounded-load table of
// the live set (placement_table.h), built off the progress thread by a
// PlacementBuilder and installed when it matches the current live set
// (rendezvous stands in while it is being built). No UCX.
//
// Threading: setLive() and startPlacement() on one thread (the progress
// thread); the readers from any thread, under mu_ (shared); installTable()
// on the builder's thread. `onChange` is called with no lock held after the
// placement changed: on setLive()'s thread without files, else on the
// builder's when the new table is in.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "cache/shared_mutex.h"
#include "transport/cluster.h"
#include "transport/placement.h"
#include "transport/placement_builder.h"
#include "transport/placement_table.h"

namespace epochfs::transport {

class LivePlacement {
 public:
  using LiveMember = transport::LiveMember;

  LivePlacement(uint32_t selfId, unsigned replicas, std::function<void()> onChange);
  // Stops the builder (a build in progress finishes first) before the members go.
  ~LivePlacement();
  LivePlacement(const LivePlacement&) = delete;
  LivePlacement& operator=(const LivePlacement&) = delete;

  // The live members changed (ids ascending): weighted by capacity when
  // every one announced one, else equally.
  void setLive(const std::vector<LiveMember>& live) EXCLUDES(mu_);
  // Placement over `files` from now on. Once: false (and nothing done) when
  // it already has files. Call setLive() after it for the first table.
  bool startPlacement(std::vector<FileBytes> files) EXCLUDES(mu_);
  // setFiles() posted files not placed yet: fit().ready is false until then.
  void setFilesPending(bool pending) { filesPending_.store(pending); }

  bool ownedElsewhere(uint64_t fileId) const EXCLUDES(mu_);
  std::vector<uint32_t> owners(uint64_t fileId) const EXCLUDES(mu_);
  Cluster::Fit fit() const EXCLUDES(mu_);
  // The bytes the table gives `id` (0 without a table).
  uint64_t ownedBytes(uint32_t id) const EXCLUDES(mu_);

 private:
  // Called by the builder with the table built for live-set `generation`.
  void installTable(std::shared_ptr<const PlacementTable> table, uint64_t generation) EXCLUDES(mu_);

  const uint32_t selfId_;
  const unsigned replicas_;
  const std::function<void()> onChange_;
  std::atomic<bool> filesPending_{false};

  mutable cache::SharedMutex mu_;
  std::vector<Candidate> live_ GUARDED_BY(mu_);
  // Null without files, and while the table of the current live set is being built.
  std::shared_ptr<const PlacementTable> table_ GUARDED_BY(mu_);
  uint64_t liveCapacity_ GUARDED_BY(mu_) = 0;
  bool liveCapacityKnown_ GUARDED_BY(mu_) = false;  // every live member announced its capacity
  uint64_t datasetBytes_ GUARDED_BY(mu_) = 0;       // of the files placed
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // +1 per live-set change; names the table wanted
  // Null until there are files; set once, by setLive()'s thread.
  std::unique_ptr<PlacementBuilder> placer_ GUARDED_BY(mu_);
};

}  // namespace epochfs::transport
