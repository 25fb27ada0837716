#include "cache/huge_page_slabs.h"

#include <sys/mman.h>

namespace epochfs::cache {

HugePageSlabs::~HugePageSlabs() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [base, slab] : slabs_) munmap(reinterpret_cast<void*>(base), kSlabBytes);
}

char* HugePageSlabs::mapSlabLocked() {
  // Twice the size, then the unaligned ends cut off: a slab that starts on a
  // 2 MiB boundary is one the kernel can map with a single huge page.
  const size_t span = 2 * kSlabBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kSlabBytes - 1) & ~uintptr_t{kSlabBytes - 1};
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + kSlabBytes) {
    munmap(reinterpret_cast<void*>(aligned + kSlabBytes), end - aligned - kSlabBytes);
  }
  char* slab = reinterpret_cast<char*>(aligned);
  madvise(slab, kSlabBytes, MADV_HUGEPAGE);  // refused where THP is off: 4 KiB pages then
  slabs_.emplace(aligned, Slab{});
  ++counts_.slabsMapped;
  counts_.slabBytes += kSlabBytes;
  return slab;
}

char* HugePageSlabs::carve(size_t bytes) {
  if (!enabled() || bytes == 0 || bytes > kMaxPieceBytes || bytes % kPageBytes != 0) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ == nullptr || used_ + bytes > kSlabBytes) {
    char* fresh = mapSlabLocked();
    if (fresh == nullptr) return nullptr;
    // The slab left behind goes once its last piece does.
    if (current_ != nullptr) {
      auto old = slabs_.find(reinterpret_cast<uintptr_t>(current_));
      if (old != slabs_.end() && old->second.livePieces == 0) {
        munmap(current_, kSlabBytes);
        slabs_.erase(old);
        ++counts_.slabsUnmapped;
        counts_.slabBytes -= kSlabBytes;
      }
    }
    current_ = fresh;
    used_ = 0;
  }
  char* piece = current_ + used_;
  used_ += bytes;
  ++slabs_[reinterpret_cast<uintptr_t>(current_)].livePieces;
  pieces_.emplace(piece, bytes);
  ++counts_.carved;
  counts_.liveBytes += bytes;
  return piece;
}

bool HugePageSlabs::release(char* piece) {
  if (piece == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pieces_.find(piece);
  if (it == pieces_.end()) return false;
  const size_t bytes = it->second;
  pieces_.erase(it);
  ++counts_.released;
  counts_.liveBytes -= bytes;
  auto slab = slabs_.find(slabOf(piece));
  const bool last = slab != slabs_.end() && --slab->second.livePieces == 0;
  if (last && reinterpret_cast<char*>(slab->first) != current_) {
    munmap(reinterpret_cast<void*>(slab->first), kSlabBytes);
    slabs_.erase(slab);
    ++counts_.slabsUnmapped;
    counts_.slabBytes -= kSlabBytes;
  } else {
    madvise(piece, bytes, MADV_DONTNEED);  // its memory back now, not at the slab's end
  }
  return true;
}

HugePageSlabs::Stats HugePageSlabs::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace epochfs::cache
