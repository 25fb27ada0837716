#include "cache/huge_page_slabs.h"

#include <sys/mman.h>

#include <vector>

namespace epochfs::cache {

HugePageSlabs::~HugePageSlabs() {
  MutexLock lock(mu_);
  for (uintptr_t slab : slabs_) munmap(reinterpret_cast<void*>(slab), kSlabBytes);
}

void HugePageSlabs::addHoleLocked(uintptr_t start, size_t bytes) {
  holes_.emplace(start, bytes);
  holesBySize_.emplace(bytes, start);
}

void HugePageSlabs::eraseHoleLocked(std::map<uintptr_t, size_t>::iterator it) {
  holesBySize_.erase({it->second, it->first});
  holes_.erase(it);
}

bool HugePageSlabs::mapSlabLocked() {
  // Twice the size, then the unaligned ends cut off: a slab that starts on a
  // 2 MiB boundary is one the kernel can map with a single huge page.
  const size_t span = 2 * kSlabBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return false;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = slabOf(start + kSlabBytes - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + kSlabBytes) {
    munmap(reinterpret_cast<void*>(aligned + kSlabBytes), end - aligned - kSlabBytes);
  }
  madvise(reinterpret_cast<void*>(aligned), kSlabBytes, MADV_HUGEPAGE);  // refused if THP is off
  slabs_.insert(aligned);
  mappedSlabs_.store(slabs_.size(), std::memory_order_relaxed);
  addHoleLocked(aligned, kSlabBytes);
  ++counts_.slabsMapped;
  counts_.holeBytes += kSlabBytes;
  return true;
}

char* HugePageSlabs::carve(size_t bytes) {
  if (!enabled() || bytes == 0 || bytes > kMaxPieceBytes || bytes % kPageBytes != 0) {
    return nullptr;
  }
  MutexLock lock(mu_);
  auto fit = holesBySize_.lower_bound({bytes, 0});
  if (fit == holesBySize_.end()) {
    if (counts_.holeBytes > holeLimit() || !mapSlabLocked()) {
      ++counts_.refused;
      return nullptr;
    }
    fit = holesBySize_.lower_bound({bytes, 0});
  }
  const auto [holeBytes, start] = *fit;
  eraseHoleLocked(holes_.find(start));
  if (holeBytes > bytes) addHoleLocked(start + bytes, holeBytes - bytes);
  pieces_.emplace(start, bytes);
  ++counts_.carved;
  counts_.liveBytes += bytes;
  counts_.holeBytes -= bytes;
  return reinterpret_cast<char*>(start);
}

bool HugePageSlabs::release(char* piece) {
  // A piece keeps its slab mapped, and whoever frees it got it through some
  // synchronisation after the carve that mapped the slab: a count of 0 seen
  // here means this is not a piece.
  if (piece == nullptr || mappedSlabs_.load(std::memory_order_relaxed) == 0) return false;
  MutexLock lock(mu_);
  auto it = pieces_.find(reinterpret_cast<uintptr_t>(piece));
  if (it == pieces_.end()) return false;
  uintptr_t start = it->first;
  size_t bytes = it->second;
  pieces_.erase(it);
  ++counts_.released;
  counts_.liveBytes -= bytes;
  counts_.holeBytes += bytes;
  // Merge with the holes on either side within the same slab (slabs may sit
  // next to each other in the address space; a hole never spans two).
  const uintptr_t slab = slabOf(start);
  auto next = holes_.find(start + bytes);
  if (next != holes_.end() && slabOf(next->first) == slab) {
    bytes += next->second;
    eraseHoleLocked(next);
  }
  auto prev = holes_.lower_bound(start);
  if (prev != holes_.begin()) {
    --prev;
    if (prev->first + prev->second == start && slabOf(prev->first) == slab) {
      start = prev->first;
      bytes += prev->second;
      eraseHoleLocked(prev);
    }
  }
  addHoleLocked(start, bytes);
  if (bytes == kSlabBytes && counts_.holeBytes > holeLimit()) unmapEmptyLocked(holeLimit());
  return true;
}

size_t HugePageSlabs::unmapEmptyLocked(size_t target) {
  size_t unmapped = 0;
  // Whole-slab holes are the largest: the back of the by-size index.
  while (counts_.holeBytes > target && !holesBySize_.empty()) {
    const auto [bytes, start] = *holesBySize_.rbegin();
    if (bytes != kSlabBytes) break;
    eraseHoleLocked(holes_.find(start));
    munmap(reinterpret_cast<void*>(start), kSlabBytes);
    slabs_.erase(start);
    mappedSlabs_.store(slabs_.size(), std::memory_order_relaxed);
    ++counts_.slabsUnmapped;
    counts_.holeBytes -= kSlabBytes;
    unmapped += kSlabBytes;
  }
  return unmapped;
}

size_t HugePageSlabs::releaseEmpty() {
  MutexLock lock(mu_);
  return unmapEmptyLocked(0);
}

void HugePageSlabs::setHoleLimit(size_t bytes) {
  holeLimit_.store(bytes, std::memory_order_relaxed);
  MutexLock lock(mu_);
  unmapEmptyLocked(bytes);
  if (bytes != 0) return;
  // Memory pressure: the partial holes' pages too. The kernel frees them when
  // reclaim splits their huge pages; a later carve faults them in again.
  for (const auto& [start, len] : holes_)
    madvise(reinterpret_cast<void*>(start), len, MADV_DONTNEED);
}

HugePageSlabs::Stats HugePageSlabs::stats() const {
  MutexLock lock(mu_);
  Stats s = counts_;
  s.slabBytes = slabs_.size() * kSlabBytes;
  return s;
}

}  // namespace epochfs::cache
