// PlanTracker: the registered plans — one PlanStream per job and rank
// (AccessPlan::job: the mount it came through) — and the two
// questions asked of them: which entry an access belongs to (the not yet
// consumed entry of the file nearest its stream's progress) and when a chunk
// is next needed (Belady's rule: the distance to that entry). Also counts
// accesses off every plan of their job: readers that left their job's plans
// end them.
// No threads of its own. The stream list is copy-on-write: a lookup takes the
// lock only to copy a pointer, never over its scan.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cache/mutex.h"
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

  // Jobs whose off-plan streaks are counted apart (more share a counter).
  static constexpr uint32_t kJobSlots = 64;

  // Installs `plan` for its job and rank; that job's rank's previous stream
  // expires (its queued prefetches are dropped, not fetched).
  std::shared_ptr<PlanStream> set(std::shared_ptr<const AccessPlan> plan, int64_t nowNs);
  // Every stream expires (`job`: only that job's).
  void clear(std::optional<uint32_t> job = std::nullopt);
  void remove(const std::shared_ptr<PlanStream>& stream);  // it expires
  bool live() const { return live_.load(std::memory_order_relaxed); }
  std::shared_ptr<const Streams> streams() const;

  // One access is one entry of one stream: other ranks' plans (or the next
  // epoch's, in the zero-change mode's two-epoch plans) may name the same
  // file and must not see it consumed. The entry nearest its stream's
  // progress among the eligible ones is the one being read. `job`: only that
  // job's streams (an access of one mount never advances another's plan).
  Match nearest(uint64_t fileId, const Eligible& eligible,
                std::optional<uint32_t> job = std::nullopt) const;
  // Entries until chunk `fileId`'s next use from the nearest stream's
  // progress, over every job's plans; cache::EvictionAdvisor::kNever when no
  // plan reads it again.
  uint64_t nextUse(uint64_t fileId) const;
  // Nanoseconds until that use at each stream's read rate, the nearest over
  // every job's plans (the eviction order: jobs read at different speeds);
  // cache::EvictionAdvisor::kNever when no plan reads it again.
  uint64_t nextUseNs(uint64_t fileId) const;

  // Counts an access of `job` on (`planned`) or off every plan of its job;
  // true when this one made `deviationReads` in a row off them (the caller
  // ends that job's plans).
  bool offPlan(bool planned, uint32_t job = 0);

  std::vector<StreamStats> stats() const;

 private:
  void replace(std::shared_ptr<const Streams> next) REQUIRES(streamsMu_);
  // The first entry of `fileId` in `s` not consumed and eligible, if any.
  static std::optional<uint32_t> nextEntry(const PlanStream& s, uint64_t fileId,
                                           const Eligible& eligible);

  const uint64_t deviationReads_;
  mutable cache::Mutex streamsMu_;
  std::shared_ptr<const Streams> streams_ GUARDED_BY(streamsMu_) = std::make_shared<Streams>();
  std::atomic<bool> live_{false};
  std::array<std::atomic<uint64_t>, kJobSlots> offPlanStreak_{};
};

}  // namespace epochfs::prefetch
