#include "prefetch/window_scheduler.h"

#include <algorithm>

#include "cache/steady_clock.h"

namespace epochfs::prefetch {

uint32_t WindowScheduler::fill(const std::shared_ptr<PlanStream>& ref, size_t streams,
                               uint32_t maxIssue) {
  PlanStream& s = *ref;
  const AccessPlan& plan = s.plan();
  uint64_t& issued = s.issued();
  const uint64_t base = std::max(s.progress(), s.highest());
  issued = std::max(issued, s.progress());
  const uint64_t target = std::min<uint64_t>(plan.size(), base + limits_.windowFiles);
  // Staged guests' guaranteed room (the prefetch memory; guests also get what
  // the own share leaves free); 0 outside a cluster.
  const uint64_t stagingArea = cache_.clustered() ? cache_.ram().guestExtraBytes() : 0;
  uint32_t queued = 0;
  const double nsPerEntry = s.nsPerEntry();
  const int64_t now = cache::steadyNowNs();
  while (issued < target && queued < maxIssue) {
    const PlanEntry& e = plan.at(issued);
    if (s.isConsumed(issued)) {
      ++issued;
      continue;
    }
    if (limits_.maxLeadBytes > 0 && issued > base &&
        plan.bytesBetween(base, issued + 1) > limits_.maxLeadBytes) {
      leadWaits_.fetch_add(1, std::memory_order_relaxed);
      break;  // far enough ahead
    }
    if (stagingArea > 0 && issued > base) {
      const uint64_t slice = stagingArea / std::max<size_t>(1, streams);
      if (plan.bytesBetween(base, issued + 1) > slice / 2) break;
    }
    // An entry larger than the whole staging area goes through the RAM tier
    // as a plain guest.
    const bool staged =
        stagingArea > 0 && cache_.ownedElsewhere(e.identity.fileId) && e.length <= stagingArea;
    // The wake flag is set before the second check, so a release between
    // the two is never missed.
    auto stagingFull = [&] {
      return staged && cache_.ram().stagingRoom() < stagingInflight_.load() + e.length;
    };
    if (stagingFull()) {
      wakeOnRelease_.store(true);
      if (stagingFull()) break;
    }
    if (!budget_.tryReserve(e.length)) {
      wakeOnRelease_.store(true);
      if (!budget_.tryReserve(e.length)) {
        budgetWaits_.fetch_add(1, std::memory_order_relaxed);
        break;  // resumes when a fetch completes
      }
    }
    if (staged) stagingInflight_.fetch_add(e.length);
    FetchTask t;
    t.stream = ref;
    t.pos = static_cast<uint32_t>(issued);
    t.staged = staged;
    t.needNs = now + static_cast<int64_t>(static_cast<double>(issued - s.progress()) * nsPerEntry);
    enqueue_(std::move(t));
    ++issued;
    ++queued;
  }
  return queued;
}

}  // namespace epochfs::prefetch
