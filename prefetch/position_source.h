// PositionSource: how the prefetcher learns where each reader stream is —
// chosen once, by the daemon, from --push-page-cache (docs/PREFETCH.md):
//   kReads      (off) an entry is consumed when a read reaches its last
//               byte, in whatever order several loader workers deliver them.
//               Nothing is pushed: every read must reach the daemon.
//   kOpens      (on) prefetched whole files are pushed into the kernel's page
//               cache, so their reads are invisible; opens reach the daemon
//               (needsOpens) and carry the position: an open of a pushed entry
//               consumes it, an entry opened before its push is consumed by
//               its reads or by the push, whichever lands first.
//   kSentinels  (sentinels) every Nth entry stays un-pushed; its read consumes
//               the pushed entries more than 2N before it (slack for loader
//               workers out of order). Opens stay zero-message.
// It owns the opened/pushed bits of PlanStream and tells the fetch side
// which entries may be pushed. Consumption itself (retiring the entry's
// chunks, waking the scheduler) is the prefetcher's, through PositionHooks.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "prefetch/plan_stream.h"
#include "prefetch/plan_tracker.h"
#include "prefetch/prefetch_options.h"

namespace epochfs::prefetch {

struct PositionHooks {
  std::function<void(PlanStream&, uint32_t pos)> consume;
  std::function<void(uint64_t fileId, uint32_t job)>
      observe;                                  // a file's reading starts (read at 0, or open)
  std::function<void(uint32_t job)> leftPlans;  // a job's readers left its plans
  std::function<int64_t()> now;                 // ns, steady clock
};

class PositionSource {
 public:
  // `sentinelEvery` (>= 1) is used by kSentinels only.
  static std::unique_ptr<PositionSource> make(PositionMode mode, uint32_t sentinelEvery,
                                              PlanTracker& tracker, PositionHooks hooks);
  virtual ~PositionSource() = default;

  virtual PositionMode mode() const = 0;
  // FUSE must send OPEN requests (no zero-message opens).
  bool needsOpens() const { return mode() == PositionMode::kOpens; }
  // May entry `pos` (a prefetched whole file) be pushed into the page cache?
  virtual bool mayPush(uint32_t pos) const = 0;

  // An open of `fileId` through the mount of `job` (AccessPlan::job).
  virtual void onOpen(uint64_t fileId, uint32_t job = 0) = 0;
  // A FUSE read of [offset, offset + size) of `fileId` through the mount of
  // `job`; `stalled`: it waited on the source or a peer (else a cache tier had it).
  void onRead(uint64_t fileId, uint64_t offset, uint64_t size, bool stalled, uint32_t job = 0);
  // Entry `pos` of `s` was pushed: consumed now when it was opened already
  // (its remaining reads may be served by the page cache and never come).
  void onPushed(PlanStream& s, uint32_t pos);

 protected:
  PositionSource(PlanTracker& tracker, PositionHooks hooks)
      : tracker_(tracker), hooks_(std::move(hooks)) {}
  // Reads (not opens) start files and count deviation.
  virtual bool readsTrackFiles() const { return true; }
  // An entry the read overlaps may be its entry (kOpens: a whole file must
  // have been opened, so a read of a file whose pushed entry an open already
  // consumed does not consume another stream's or epoch's entry).
  virtual bool readMayConsume(const PlanStream& s, uint32_t pos) const { return true; }
  // After a read consumed entry `pos` (kSentinels: the sweep).
  virtual void afterReadConsumed(PlanStream& s, uint32_t pos) {}

  PlanTracker& tracker_;
  PositionHooks hooks_;
};

}  // namespace epochfs::prefetch
