// FetchBudget: the bytes of prefetch and read-ahead reads in flight, kept
// within a capacity (PrefetchOptions::memoryBytes). One reservation of any
// size is allowed while nothing is in flight, so an entry larger than the
// whole budget still makes progress.
// Thread-safety: every method may be called from any thread (the scheduler
// reserves for plan entries while FUSE threads reserve read-ahead).
#pragma once

#include <atomic>
#include <cstdint>

namespace epochfs::prefetch {

class FetchBudget {
 public:
  explicit FetchBudget(uint64_t capacityBytes) : capacity_(capacityBytes) {}

  // Takes `bytes` and one task; false when the budget is full.
  bool tryReserve(uint64_t bytes);
  void release(uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t bytes() const { return bytes_.load(); }
  uint64_t tasks() const { return tasks_.load(); }  // queued or being fetched
  // The most bytes ever in flight at once (at most the capacity, or one
  // reservation larger than it when nothing else was in flight).
  uint64_t peak() const { return peak_.load(); }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> bytes_{0}, tasks_{0}, peak_{0};
};

}  // namespace epochfs::prefetch
