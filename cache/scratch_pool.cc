#include "cache/scratch_pool.h"

#include <cstdlib>

namespace epochfs::cache {

ScratchPool::~ScratchPool() {
  for (auto& [data, size] : idle_) std::free(data);
}

ScratchPool::Lease ScratchPool::acquire(size_t size) {
  const size_t rounded = (size + alignment_ - 1) / alignment_ * alignment_;
  {
    MutexLock lock(mu_);
    // The most recently returned buffer that is large enough (its pages are
    // the likeliest to be resident still).
    for (size_t i = idle_.size(); i-- > 0;) {
      if (idle_[i].second >= rounded) {
        auto b = idle_[i];
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        return Lease(this, b.first, b.second);
      }
    }
  }
  return Lease(this, static_cast<char*>(std::aligned_alloc(alignment_, rounded)), rounded);
}

void ScratchPool::release(char* data, size_t size) {
  {
    MutexLock lock(mu_);
    if (idle_.size() < maxIdle_) {
      idle_.emplace_back(data, size);
      return;
    }
  }
  std::free(data);
}

size_t ScratchPool::idleCount() const {
  MutexLock lock(mu_);
  return idle_.size();
}

}  // namespace epochfs::cache
