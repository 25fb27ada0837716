// AllocatorTrimmer: keeps memory the daemon has freed from staying resident.
// Evicted chunk buffers (up to 128 KiB: larger ones are mappings of their own,
// memory_limit.h boundAllocatorRetention) are freed into glibc's arenas; glibc
// gives memory back to the kernel only from the top of a heap, so the holes
// that evictions leave in the middle stay resident. Measured: a 60-epoch soak
// (--ram-cache 64M, 2,000 files of ~110 KB, 2 readers) grew the daemon's RSS
// from 100 MB after epoch 10 to 116 MB after epoch 41 and still rising, while
// the tier held 64 MiB throughout; malloc_trim(0) took the heap from 82 to
// 61 MB (tools/bench/soak-bench measures it).
//
// Once a `period` the trimmer asks glibc how many free bytes its arenas hold
// (mallinfo2().fordblks) and, above `slackBytes`, calls malloc_trim(0), which
// returns every whole free page to the kernel. The slack keeps trims rare: a
// trimmed page faults in again when it is reused. Before that look it frees
// the chunk buffers that sat idle in cache::ChunkBufferPool for the whole
// period (releaseUnused); the ones being reused stay: freeing them at each
// trim would fault in again exactly the memory the pool exists to keep.
//
// Thread-safety: start()/stop() from one thread; pollOnce() from the
// trimmer's own thread (or a test).
#pragma once

#include <chrono>
#include <cstdint>

#include "fusefs/daemon/periodic_thread.h"

namespace epochfs::fusefs {

class AllocatorTrimmer {
 public:
  // The slack for a RAM tier of `tierBytes`: 1/16 of it, at least 16 MiB.
  static uint64_t slackFor(uint64_t tierBytes);

  explicit AllocatorTrimmer(uint64_t slackBytes,
                            std::chrono::milliseconds period = std::chrono::seconds(1));
  ~AllocatorTrimmer();
  AllocatorTrimmer(const AllocatorTrimmer&) = delete;
  AllocatorTrimmer& operator=(const AllocatorTrimmer&) = delete;

  void start();
  void stop();
  // One look at the arenas; true when it trimmed.
  bool pollOnce();

  uint64_t trims() const { return trims_; }

 private:
  const uint64_t slackBytes_;
  const std::chrono::milliseconds period_;
  uint64_t trims_ = 0;
  PeriodicThread thread_;
};

}  // namespace epochfs::fusefs
