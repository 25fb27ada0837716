// HugePageSlabs: fresh memory for page-aligned chunk buffers, carved one
// after another from 2 MiB-aligned slabs the kernel may back with transparent
// huge pages (MADV_HUGEPAGE). Owns the slabs (anonymous mappings) and the
// record of which pieces are live.
//
// Why: on the VM this runs on, the first touch of a 4 KiB page the process
// never used costs far more than the read that fills it: an O_DIRECT read of a
// ~110 KB file into a fresh aligned_alloc buffer took 2,900-3,200 us and the
// XXH3 pass over it 170-190 us, into pieces carved from a MADV_HUGEPAGE region
// 140-240 us and 6 us (tools/fresh-memory-check, docs/PERFORMANCE.md "The
// cold path"). The chunk-buffer pool (chunk_buffer_pool.h) removes fresh
// memory where chunks are freed; a first epoch that fills a RAM tier frees
// none, and that is where these slabs pay: one fault per 2 MiB instead of 512.
//
// Lifetime of a piece: carve() hands out `bytes` (a multiple of 4 KiB, at most
// kMaxPieceBytes) at the current slab's end, or opens a new slab when it does
// not fit (the old slab's tail, < one piece, stays unused). The owner gives it
// back to release(): its pages go back to the kernel at once (MADV_DONTNEED,
// which splits a huge page: the rest of the slab stays resident), and a slab
// whose pieces are all released is unmapped (the one being carved stays).
// So resident memory is the live pieces plus the current slab, and mappings
// are at most one per live piece plus one.
//
// Where THP is off (`never`) the madvise is refused and the slabs are plain
// 4 KiB pages: nothing is lost against aligned_alloc. Off until enable(true).
//
// Thread-safety: every member is thread-safe (one mutex; a carve or release
// is a few map operations, a new slab an mmap).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace epochfs::cache {

class HugePageSlabs {
 public:
  static constexpr size_t kSlabBytes = size_t{2} << 20;
  static constexpr size_t kMaxPieceBytes = kSlabBytes / 2;
  static constexpr size_t kPageBytes = 4096;

  struct Stats {
    uint64_t carved = 0;         // pieces handed out, since start
    uint64_t released = 0;       // pieces given back, since start
    uint64_t slabsMapped = 0;    // slabs mapped, since start
    uint64_t slabsUnmapped = 0;  // slabs unmapped, since start
    size_t liveBytes = 0;        // bytes of the pieces not yet released
    size_t slabBytes = 0;        // bytes of the slabs mapped now
  };

  HugePageSlabs() = default;
  ~HugePageSlabs();  // unmaps every slab: no piece may outlive it
  HugePageSlabs(const HugePageSlabs&) = delete;
  HugePageSlabs& operator=(const HugePageSlabs&) = delete;

  void enable(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // A page-aligned piece of `bytes`, uninitialised; nullptr when off, when
  // `bytes` is not a page multiple in (0, kMaxPieceBytes], or when mmap fails
  // (the caller falls back to malloc).
  char* carve(size_t bytes);
  // Takes back a piece carve() returned (true), else does nothing (false: the
  // block is not one of ours, free it elsewhere).
  bool release(char* piece);

  Stats stats() const;

 private:
  struct Slab {
    size_t livePieces = 0;
  };
  static uintptr_t slabOf(const char* p) {
    return reinterpret_cast<uintptr_t>(p) & ~uintptr_t{kSlabBytes - 1};
  }
  // A fresh 2 MiB-aligned slab, or nullptr. Needs mu_.
  char* mapSlabLocked();

  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;
  char* current_ = nullptr;                         // the slab being carved; guarded by mu_
  size_t used_ = 0;                                 // bytes carved from current_; guarded by mu_
  std::unordered_map<uintptr_t, Slab> slabs_;       // guarded by mu_
  std::unordered_map<const char*, size_t> pieces_;  // live piece -> bytes; guarded by mu_
  Stats counts_;                                    // guarded by mu_
};

}  // namespace epochfs::cache
