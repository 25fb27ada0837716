// PlanStream: one registered plan as its reader goes through it — each
// entry's state, the stream's progress, its counters and its read rate.
//
// An entry's state is four bits, each set once and never cleared:
//   prefetched  its bytes were fetched ahead of the reader
//   opened      an open named it (position from opens only)
//   pushed      its bytes went into the kernel's page cache (after prefetched)
//   consumed    the reader is done with it: progress counts it
// Any order of prefetched/opened/consumed is legal (loader workers race the
// prefetch workers); pushed requires prefetched, which debug builds assert.
// Progress is start + consumed entries, whatever order they were consumed in.
// Thread-safety: every method may be called from any thread, except those
// marked "scheduler thread only".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "prefetch/access_plan.h"

namespace epochfs::prefetch {

struct StreamStats {
  int64_t epoch = 0;
  int rank = 0;
  uint32_t job = 0;     // the mount the plan was registered through
  uint64_t length = 0;  // plan entries
  uint64_t start = 0;
  uint64_t position = 0;   // start + consumed entries
  uint64_t leadFiles = 0;  // prefetched or in flight beyond the position
  double leadSeconds = 0;  // leadFiles at the recent consumption rate
  uint64_t consumed = 0;
  uint64_t stalls = 0;  // planned reads that had to wait on the source or a peer
  uint64_t hits = 0;    // planned reads served from a cache tier
  uint64_t prefetchedFiles = 0;
  uint64_t prefetchedBytes = 0;
  bool expired = false;
};

class PlanStream {
 public:
  PlanStream(std::shared_ptr<const AccessPlan> plan, int64_t nowNs);

  const AccessPlan& plan() const { return *plan_; }
  uint64_t progress() const { return plan_->start() + consumed_.load(std::memory_order_relaxed); }
  // The highest consumed position + 1 (ahead of progress when readers skip).
  uint64_t highest() const { return highest_.load(std::memory_order_relaxed); }

  bool isConsumed(uint64_t pos) const { return (bits(pos) & kConsumed) != 0; }
  bool isOpened(uint64_t pos) const { return (bits(pos) & kOpened) != 0; }
  bool isPushed(uint64_t pos) const { return (bits(pos) & kPushed) != 0; }

  // Marks `pos` consumed; returns the stream's consumed count after it, or 0
  // when it already was (the caller retires the entry's chunks only once).
  uint64_t consume(uint32_t pos);
  // Marks `pos` fetched; counts it in the lead unless already consumed.
  void markPrefetched(uint32_t pos);
  // Marks `pos` opened; true when it had been pushed already.
  bool markOpened(uint32_t pos);
  // Marks `pos` pushed (it must be prefetched); true when it had been opened.
  bool markPushed(uint32_t pos);
  // Sentinel mode: claims the positions [from, target) for one sweep of the
  // pushed entries; false when another sweep covered them already.
  bool claimSweep(uint64_t target, uint64_t* from);

  void countHit() { hits_.fetch_add(1, std::memory_order_relaxed); }
  void countStall() { stalls_.fetch_add(1, std::memory_order_relaxed); }
  void countFetched(uint64_t bytes);
  // The reader made progress (or an open named an entry) at `nowNs`.
  void touch(int64_t nowNs) { lastProgressNs_.store(nowNs, std::memory_order_relaxed); }
  bool idleLongerThan(int64_t nowNs, double seconds) const;

  void expire() { expired_.store(true); }
  bool expired() const { return expired_.load(); }

  // Scheduler thread only: the next position to prefetch, and the
  // consumption rate (an EWMA over ~1 s windows) for the lead in seconds.
  uint64_t& issued() { return issued_; }
  void updateRate(int64_t nowNs);
  double filesPerSecond() const { return filesPerSecond_.load(); }  // 0: not known yet
  // The time one entry takes at that rate: 1 ms until it is known, at most
  // 1 s (a stream that waits for its data is slow, not never needed).
  double nsPerEntry() const;

  StreamStats stats() const;

 private:
  static constexpr uint8_t kConsumed = 1, kPrefetched = 2, kOpened = 4, kPushed = 8;
  uint8_t bits(uint64_t pos) const { return state_[pos].load(std::memory_order_relaxed); }

  std::shared_ptr<const AccessPlan> plan_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;  // k* bits per entry
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> highest_{0};
  std::atomic<int64_t> lastProgressNs_{0};
  std::atomic<uint64_t> stalls_{0}, hits_{0}, prefetchedFiles_{0}, prefetchedBytes_{0};
  std::atomic<uint64_t> ahead_{0};  // entries prefetched and not yet consumed
  std::atomic<double> filesPerSecond_{0};
  std::atomic<bool> expired_{false};
  std::atomic<uint64_t> sweptTo_{0};  // sentinel mode: pushed entries before it are consumed
  // Scheduler thread only.
  uint64_t issued_ = 0;
  int64_t rateSinceNs_ = 0;
  uint64_t rateSinceConsumed_ = 0;
};

}  // namespace epochfs::prefetch
