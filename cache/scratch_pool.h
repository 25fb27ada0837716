// ScratchPool: aligned buffers for O_DIRECT source reads, shared by every
// thread. A buffer is leased for one read and handed back; at most `maxIdle`
// free buffers are kept for reuse and the rest are freed, so the memory held
// when reads pause is bounded by maxIdle buffers, not by the number of threads
// that ever read (a thread_local buffer per thread held chunk size x every
// FUSE and prefetch thread, 48 MiB with the defaults, for the daemon's life).
// Thread-safe.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "cache/mutex.h"

namespace epochfs::cache {

class ScratchPool {
 public:
  ScratchPool(size_t alignment, size_t maxIdle) : alignment_(alignment), maxIdle_(maxIdle) {}
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // One buffer of at least the asked size, aligned; data() is null when out
  // of memory. Returned to the pool when the lease ends.
  class Lease {
   public:
    Lease(ScratchPool* pool, char* data, size_t size) : pool_(pool), data_(data), size_(size) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), data_(o.data_), size_(o.size_) {
      o.data_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (data_ != nullptr) pool_->release(data_, size_);
    }
    char* data() const { return data_; }

   private:
    ScratchPool* pool_;
    char* data_;
    size_t size_;
  };

  Lease acquire(size_t size);
  // Free buffers kept now (for tests and stats).
  size_t idleCount() const;

 private:
  void release(char* data, size_t size);

  const size_t alignment_;
  const size_t maxIdle_;
  mutable Mutex mu_;
  std::vector<std::pair<char*, size_t>> idle_ GUARDED_BY(mu_);
};

}  // namespace epochfs::cache
