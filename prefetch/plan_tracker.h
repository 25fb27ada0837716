// PlanTracker: the registered plans — one PlanStream per rank — and the two
// questions asked of them: which entry an access belongs to (the not yet
// consumed entry of the file nearest its stream's progress) and when a chunk
// is next needed (Belady's rule: the distance to that entry). Also counts
// accesses off every plan: readers that left the plans end them.
// No threads of its own. The stream list is copy-on-write: a lookup takes the
// lock only to copy a pointer, never over its scan.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "prefetch/access_plan.h"
#include "prefetch/plan_stream.h"

namespace epochfs::prefetch {

class PlanTracker {
 public:
  using Streams = std::vector<std::shared_ptr<PlanStream>>;
  // Whether entry `pos` of a stream may be the access's entry.
  using Eligible = std::function<bool(const PlanStream&, uint32_t pos)>;

  struct Match {
    std::shared_ptr<PlanStream> stream;  // null: no eligible entry
    uint32_t pos = 0;
    uint64_t distance = 0;  // entries from the stream's progress
    bool planned = false;   // some plan names the file
  };

  explicit PlanTracker(uint64_t deviationReads) : deviationReads_(deviationReads) {}

  // Installs `plan` for its rank; that rank's previous stream expires (its
  // queued prefetches are dropped, not fetched).
  std::shared_ptr<PlanStream> set(std::shared_ptr<const AccessPlan> plan, int64_t nowNs);
  void clear();                                            // every stream expires
  void remove(const std::shared_ptr<PlanStream>& stream);  // it expires
  bool live() const { return live_.load(std::memory_order_relaxed); }
  std::shared_ptr<const Streams> streams() const;

  // One access is one entry of one stream: other ranks' plans (or the next
  // epoch's, in the zero-change mode's two-epoch plans) may name the same
  // file and must not see it consumed. The entry nearest its stream's
  // progress among the eligible ones is the one being read.
  Match nearest(uint64_t fileId, const Eligible& eligible) const;
  // Entries until chunk `fileId`'s next use from the nearest stream's progress;
  // cache::EvictionAdvisor::kNever when no plan reads it again.
  uint64_t nextUse(uint64_t fileId) const;

  // Counts an access on (`planned`) or off every plan; true when this one
  // made `deviationReads` in a row off them (the caller ends the plans).
  bool offPlan(bool planned);

  std::vector<StreamStats> stats() const;

 private:
  void replace(std::shared_ptr<const Streams> next);  // streamsMu_ held

  const uint64_t deviationReads_;
  mutable std::mutex streamsMu_;  // guards streams_ (the pointer)
  std::shared_ptr<const Streams> streams_ = std::make_shared<Streams>();
  std::atomic<bool> live_{false};
  std::atomic<uint64_t> offPlanStreak_{0};
};

}  // namespace epochfs::prefetch
