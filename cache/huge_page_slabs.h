// HugePageSlabs: memory for page-aligned chunk buffers, carved from 2 MiB-
// aligned slabs the kernel may back with transparent huge pages
// (MADV_HUGEPAGE), and reused inside them. Owns the slabs (anonymous
// mappings), the record of live pieces and the free ranges ("holes").
//
// Why: on the VM this runs on, the first touch of a 4 KiB page the process
// never used costs far more than the read that fills it: an O_DIRECT read of a
// ~110 KB file into a fresh aligned_alloc buffer took 2,900-3,200 us and the
// XXH3 pass over it 170-190 us; into memory carved from a MADV_HUGEPAGE region
// 140-240 us and 6 us (tools/bench/fresh-memory-check, docs/PERFORMANCE.md "The
// cold path"). A first epoch that fills a RAM tier frees nothing for the
// chunk-buffer pool to recycle: slabs make its fresh memory one fault per
// 2 MiB instead of 512.
//
// Why holes are reused, never handed back piecewise: MADV_DONTNEED on part of
// a huge page frees nothing until the whole 2 MiB goes or memory pressure
// splits it (measured: after such frees VmRSS fell while MemFree did
// not). So a released piece stays resident as a hole, and the next carve
// takes the smallest hole that fits (best fit, lowest address among equals);
// neighbouring holes of one slab merge, and a slab that is all hole is
// unmapped (whole, so its huge page really goes) once the holes pass the
// bound or releaseEmpty() is called.
//
// The bound (holeLimit, set by the chunk-buffer pool to its idle bound): a new
// slab is mapped only while the holes total at most holeLimit; else carve()
// returns nullptr and the caller uses malloc. So the slabs never hold more
// than the most their live pieces ever held plus holeLimit plus one slab; in
// a tier's steady churn the holes hover near the bound (4.7-9.3 MiB against
// 4 MiB in the 64 MiB-tier soak, docs/PERFORMANCE.md; unit-tested). holeLimit
// 0 (memory pressure) unmaps empty slabs and advises the kernel to drop the
// holes' pages (reclaim then splits the huge pages and frees them).
//
// Where THP is off (`never`) the madvise is refused and the slabs are plain
// 4 KiB pages: still reused in place. Off until enable(true).
//
// Thread-safety: every member is thread-safe (one mutex; a carve or release
// is a few ordered-map operations, a new slab an mmap).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "cache/mutex.h"

namespace epochfs::cache {

class HugePageSlabs {
 public:
  static constexpr size_t kSlabBytes = size_t{2} << 20;
  static constexpr size_t kMaxPieceBytes = kSlabBytes / 2;
  static constexpr size_t kPageBytes = 4096;

  struct Stats {
    uint64_t carved = 0;         // pieces handed out, since start
    uint64_t released = 0;       // pieces given back, since start
    uint64_t refused = 0;        // carves that found no hole and could not map a slab
    uint64_t slabsMapped = 0;    // slabs mapped, since start
    uint64_t slabsUnmapped = 0;  // slabs unmapped, since start
    size_t liveBytes = 0;        // bytes of the pieces not yet released
    size_t holeBytes = 0;        // bytes of the free ranges in mapped slabs
    size_t slabBytes = 0;        // bytes of the slabs mapped now (= live + holes)
  };

  HugePageSlabs() = default;
  ~HugePageSlabs();  // unmaps every slab: no piece may outlive it
  HugePageSlabs(const HugePageSlabs&) = delete;
  HugePageSlabs& operator=(const HugePageSlabs&) = delete;

  void enable(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // The holes' bound (see above); lowering it unmaps empty slabs down to it,
  // and 0 also drops the holes' pages.
  void setHoleLimit(size_t bytes);
  size_t holeLimit() const { return holeLimit_.load(std::memory_order_relaxed); }

  // A page-aligned piece of `bytes`, uninitialised (it may hold a released
  // piece's old bytes); nullptr when off, when `bytes` is not a page multiple
  // in (0, kMaxPieceBytes], when no hole fits and the holes are past the
  // bound, or when mmap fails (the caller falls back to malloc).
  char* carve(size_t bytes);
  // Takes back a piece carve() returned (true), else does nothing (false: the
  // block is not one of ours, free it elsewhere).
  bool release(char* piece);
  // Unmaps every slab that holds no live piece; returns the bytes unmapped.
  size_t releaseEmpty();

  Stats stats() const;

 private:
  static uintptr_t slabOf(uintptr_t p) { return p & ~uintptr_t{kSlabBytes - 1}; }
  // Maps a fresh 2 MiB-aligned slab and records it as one hole; false when
  // mmap fails.
  bool mapSlabLocked() REQUIRES(mu_);
  void addHoleLocked(uintptr_t start, size_t bytes) REQUIRES(mu_);
  void eraseHoleLocked(std::map<uintptr_t, size_t>::iterator it) REQUIRES(mu_);
  // Unmaps empty slabs while the holes exceed `target`.
  size_t unmapEmptyLocked(size_t target) REQUIRES(mu_);

  std::atomic<bool> enabled_{false};
  std::atomic<size_t> holeLimit_{0};
  // slabs_.size(), readable without mu_: release() of a buffer that cannot be
  // a piece (no slab mapped, as with the slabs off) then takes no lock.
  std::atomic<size_t> mappedSlabs_{0};
  mutable Mutex mu_;
  std::map<uintptr_t, size_t> holes_ GUARDED_BY(mu_);                   // start -> bytes
  std::set<std::pair<size_t, uintptr_t>> holesBySize_ GUARDED_BY(mu_);  // (bytes, start)
  std::unordered_map<uintptr_t, size_t> pieces_ GUARDED_BY(mu_);        // live piece -> bytes
  std::set<uintptr_t> slabs_ GUARDED_BY(mu_);                           // mapped slab starts
  Stats counts_ GUARDED_BY(mu_);  // slabBytes unused here: stats() derives it from slabs_
};

}  // namespace epochfs::cache
