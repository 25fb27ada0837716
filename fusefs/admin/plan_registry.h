// PlanRegistry: the orders registered over the admin socket (the latest per
// rank, until `order --clear`), kept for `epochctl mrc`, which replays them
// client-side. The plans are the prefetcher's own immutable AccessPlans,
// shared, not copied. Entries are served by file id and size only — never
// by name — in pages under the message cap.
// Thread-safety: all methods from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "prefetch/access_plan.h"

namespace epochfs::fusefs {

class PlanRegistry {
 public:
  // Entries per plan_entries page: [file_id, file_size, offset, length] each,
  // at most ~80 bytes of JSON, so a page stays well under 64 KiB.
  static constexpr size_t kPageEntries = 700;

  void set(std::shared_ptr<const prefetch::AccessPlan> plan);
  void clear();

  // {"plans": [{"rank", "epoch", "start", "length", "bytes"}...]}, by rank.
  nlohmann::json summary() const;
  // One page of the plan of `rank` from `offset`: {"rank", "epoch", "start",
  // "length", "entries": [[file_id, file_size, offset, length]...],
  // "next_offset": N or null}. Throws AdminError when there is no such plan.
  nlohmann::json page(int rank, uint64_t offset) const;

 private:
  mutable std::mutex mu_;  // guards plans_
  std::map<int, std::shared_ptr<const prefetch::AccessPlan>> plans_;
};

}  // namespace epochfs::fusefs
