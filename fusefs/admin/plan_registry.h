// PlanRegistry: the orders registered over the admin socket (the latest per
// job and rank, until `order --clear` of that job: a job is a mount of the
// daemon, AccessPlan::job), kept for `epochctl mrc`, which replays them
// client-side. The plans are the prefetcher's own immutable AccessPlans,
// shared, not copied. Entries are served by file id and size only — never
// by name — in pages under the message cap.
// Thread-safety: all methods from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cache/mutex.h"
#include "prefetch/access_plan.h"

namespace epochfs::fusefs {

class PlanRegistry {
 public:
  // Entries per plan_entries page: [file_id, file_size, offset, length] each,
  // at most ~80 bytes of JSON, so a page stays well under 64 KiB.
  static constexpr size_t kPageEntries = 700;

  void set(std::shared_ptr<const prefetch::AccessPlan> plan);
  void clear(uint32_t job);

  // {"plans": [{"rank", "epoch", "start", "length", "bytes"}...]} of `job`, by rank.
  nlohmann::json summary(uint32_t job) const;
  // One page of the plan of `job`'s `rank` from `offset`: {"rank", "epoch",
  // "start", "length", "entries": [[file_id, file_size, offset, length]...],
  // "next_offset": N or null}. Throws AdminError when there is no such plan.
  nlohmann::json page(uint32_t job, int rank, uint64_t offset) const;

 private:
  mutable cache::Mutex mu_;
  std::map<std::pair<uint32_t, int>, std::shared_ptr<const prefetch::AccessPlan>> plans_
      GUARDED_BY(mu_);
};

}  // namespace epochfs::fusefs
