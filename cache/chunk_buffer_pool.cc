#include "cache/chunk_buffer_pool.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace epochfs::cache {

namespace {
// Up to here classes are whole pages (16 pages = 1/16 of 64 KiB already).
constexpr size_t kPageClassLimit = 128 * 1024;
constexpr int kPageClasses = static_cast<int>(kPageClassLimit / ChunkBufferPool::kPageBytes);
constexpr size_t kClassesPerDoubling = 16;
constexpr size_t kLargerClasses = 2;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void freeAll(const std::vector<char*>& blocks) {
  for (char* b : blocks) std::free(b);
}
}  // namespace

ChunkBufferPool::ChunkBufferPool(size_t idleLimitBytes, size_t maxBufferBytes)
    : idleLimit_(idleLimitBytes), maxBufferBytes_(maxBufferBytes) {}

ChunkBufferPool::~ChunkBufferPool() { drain(); }

ChunkBufferPool& ChunkBufferPool::global() {
  // Never destroyed: a chunk may be freed by another static's destructor.
  static ChunkBufferPool* pool = new ChunkBufferPool();
  return *pool;
}

size_t ChunkBufferPool::idleLimitFor(uint64_t tierBytes) {
  return static_cast<size_t>(
      std::clamp<uint64_t>(tierBytes / 32, uint64_t{4} << 20, uint64_t{32} << 20));
}

size_t ChunkBufferPool::classCapacity(size_t pageRounded) {
  if (pageRounded <= kPageClassLimit) return pageRounded;
  const size_t base = std::bit_floor(pageRounded - 1);  // pageRounded in (base, 2 base]
  return roundUp(pageRounded, base / kClassesPerDoubling);
}

int ChunkBufferPool::classOf(size_t pageRounded, size_t maxBuffer) const {
  if (pageRounded < kMinPooledBytes || pageRounded % kPageBytes != 0) return -1;
  if (classCapacity(pageRounded) != pageRounded || pageRounded > maxBuffer) return -1;
  if (pageRounded <= kPageClassLimit) return static_cast<int>(pageRounded / kPageBytes) - 1;
  const size_t base = std::bit_floor(pageRounded - 1);
  const size_t step = base / kClassesPerDoubling;
  const int doublings = std::countr_zero(base) - std::countr_zero(kPageClassLimit);
  return kPageClasses - 1 + doublings * static_cast<int>(kClassesPerDoubling) +
         static_cast<int>((pageRounded - base) / step);
}

size_t ChunkBufferPool::capacityFor(size_t size) const {
  const size_t pages = roundUp(std::max<size_t>(size, 1), kPageBytes);
  if (idleLimit() == 0 || pages < kMinPooledBytes) return pages;
  const size_t cls = classCapacity(pages);
  return cls <= maxBufferBytes_.load(std::memory_order_relaxed) ? cls : pages;
}

char* ChunkBufferPool::take(size_t capacity, size_t* taken) {
  *taken = 0;
  if (idleLimit() == 0) return nullptr;
  const int c = classOf(capacity, maxBufferBytes_.load(std::memory_order_relaxed));
  if (c < 0) return nullptr;
  MutexLock lock(mu_);
  // Its own class, else one of the next kLargerClasses: with a few MiB idle
  // over ~40 classes the exact class is empty half the time (simulated: hits
  // 45 % -> 65 % at 4 MiB for 110 KB log-normal files), for ~2 % more slack.
  const size_t last = std::min(idle_.size(), static_cast<size_t>(c) + 1 + kLargerClasses);
  for (size_t k = static_cast<size_t>(c); k < last; ++k) {
    if (idle_[k].empty()) continue;
    // Newest first: the most likely to be in the CPU's caches.
    char* b = idle_[k].back();
    idle_[k].pop_back();
    *taken = capacityOfClass(k);
    idleBytes_ -= *taken;
    lowWater_ = std::min(lowWater_, idleBytes_);
    ++counts_.reused;
    return b;
  }
  ++counts_.missed;
  return nullptr;
}

void ChunkBufferPool::give(char* block, size_t capacity) {
  if (block == nullptr || slabs_.release(block)) return;
  const size_t limit = idleLimit();
  const int c =
      limit == 0 ? -1 : classOf(capacity, maxBufferBytes_.load(std::memory_order_relaxed));
  if (c < 0) {  // not keepable (pool off, or a size it does not hold): no lock
    bypassFreed_.fetch_add(1, std::memory_order_relaxed);
    std::free(block);
    return;
  }
  {
    MutexLock lock(mu_);
    if (idleBytes_ + capacity <= limit) {
      if (static_cast<size_t>(c) >= idle_.size()) idle_.resize(c + 1);
      idle_[c].push_back(block);
      idleBytes_ += capacity;
      ++counts_.kept;
      return;
    }
    ++counts_.freed;
  }
  std::free(block);
}

size_t ChunkBufferPool::capacityOfClass(size_t cls) {
  if (cls < static_cast<size_t>(kPageClasses)) return (cls + 1) * kPageBytes;
  const size_t rest = cls - (kPageClasses - 1) - 1;
  const size_t base = kPageClassLimit << (rest / kClassesPerDoubling);
  return base + (rest % kClassesPerDoubling + 1) * (base / kClassesPerDoubling);
}

std::vector<char*> ChunkBufferPool::collectDownToLocked(size_t target) {
  std::vector<char*> out;
  // Largest classes first: the fewest blocks for the bytes, and the sizes
  // least often asked for.
  for (size_t c = idle_.size(); c-- > 0 && idleBytes_ > target;) {
    auto& list = idle_[c];
    const size_t cap = capacityOfClass(c);
    size_t n = 0;  // oldest (front) first
    while (n < list.size() && idleBytes_ > target) {
      out.push_back(list[n++]);
      idleBytes_ -= cap;
    }
    list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n));
  }
  lowWater_ = std::min(lowWater_, idleBytes_);
  counts_.released += out.size();
  return out;
}

size_t ChunkBufferPool::freeDownTo(size_t target) {
  std::vector<char*> out;
  size_t freed = 0;
  {
    MutexLock lock(mu_);
    const size_t before = idleBytes_;
    out = collectDownToLocked(target);
    freed = before - idleBytes_;
  }
  freeAll(out);
  return freed;
}

size_t ChunkBufferPool::drain() { return freeDownTo(0) + slabs_.releaseEmpty(); }

size_t ChunkBufferPool::releaseUnused() {
  std::vector<char*> out;
  size_t freed = 0;
  {
    MutexLock lock(mu_);
    // lowWater_ bytes sat idle the whole period: nobody needed them.
    const size_t before = idleBytes_;
    out = collectDownToLocked(idleBytes_ - std::min(lowWater_, idleBytes_));
    freed = before - idleBytes_;
    lowWater_ = idleBytes_;
  }
  freeAll(out);
  return freed + slabs_.releaseEmpty();
}

void ChunkBufferPool::setIdleLimit(size_t bytes) {
  idleLimit_.store(bytes, std::memory_order_relaxed);
  slabs_.setHoleLimit(bytes);
  freeDownTo(bytes);
}

void ChunkBufferPool::setLimits(size_t idleLimitBytes, size_t maxBufferBytes) {
  maxBufferBytes_.store(maxBufferBytes, std::memory_order_relaxed);
  // Classes above the new maximum can no longer be asked for.
  std::vector<char*> out;
  {
    MutexLock lock(mu_);
    for (size_t c = 0; c < idle_.size(); ++c) {
      if (capacityOfClass(c) <= maxBufferBytes) continue;
      for (char* b : idle_[c]) out.push_back(b);
      idleBytes_ -= idle_[c].size() * capacityOfClass(c);
      counts_.released += idle_[c].size();
      idle_[c].clear();
    }
    lowWater_ = std::min(lowWater_, idleBytes_);
  }
  freeAll(out);
  setIdleLimit(idleLimitBytes);
}

ChunkBufferPool::Stats ChunkBufferPool::stats() const {
  MutexLock lock(mu_);
  Stats s = counts_;
  s.freed += bypassFreed_.load(std::memory_order_relaxed);
  s.idleBytes = idleBytes_;
  for (const auto& list : idle_) s.idleBuffers += list.size();
  return s;
}

}  // namespace epochfs::cache
