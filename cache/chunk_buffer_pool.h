// ChunkBufferPool: page-aligned chunk buffers that were freed, kept idle for
// the next source read instead of going back to malloc. Owns the idle blocks
// (raw, page-aligned, from aligned_alloc) and frees them when they leave the
// bound, on drain() and on destruction. Owns the huge-page slabs too
// (huge_page_slabs.h): once the daemon enables them, a buffer no idle block
// serves is carved from a slab, and a carved buffer goes back to its slab
// when freed (a hole the next carve reuses), never into the idle lists.
//
// Why: on the VM this runs on, memory the process has never touched costs more
// than the read itself. An O_DIRECT read of ~110 KB into a fresh buffer took
// 800-1,050 us and the XXH3 pass over it 140-166 us, against 211-323 us and
// 7-23 us into a buffer used before (tools/bench/fresh-memory-check,
// docs/PERFORMANCE.md "The cold path"). Every chunk above 128 KiB is a mapping
// of its own (memory_limit.h boundAllocatorRetention), so each one's free is a
// munmap and the next allocation faults every page again; smaller ones land
// in arena holes that the allocator trimmer hands back to the kernel. Once
// the RAM tier is full each admitted chunk evicts one: the evicted buffer,
// kept here, is the next read's buffer, already faulted in.
//
// Size classes. A request's capacity is its size rounded up to 4 KiB and then
// to a class: 4 KiB steps up to 128 KiB, then 16 classes per doubling (at most
// 1/16 = 6.25 % more than the page-rounded size, ~3 % on average). Buffers of
// one class are interchangeable, so in a steady epoch the frees of a class feed
// its requests; a take whose class is empty takes one of the next two classes
// (so a buffer is at most 3 steps, < 20 %, larger than its page-rounded size;
// ~4 % on average for 110 KB files). The slack past size() is not in the RAM
// tier's accounting; it is faulted in only by a larger request's read.
// Sizes below kMinPooledBytes (cheap, the arenas recycle them) and above
// maxBufferBytes (default 1 MiB, the default chunk size) bypass the pool.
//
// Bound on idle memory: idleLimitBytes (0 = off: every free goes to malloc, as
// before the pool). The daemon sets idleLimitFor(RAM tier) = 1/32 of the tier,
// within 4..32 MiB. A free that would go past the bound is freed at once.
// Idle memory that is not being reused is handed back: releaseUnused(), called
// by the allocator trimmer once a second, frees as many bytes as stayed idle
// for the whole period (the low-water mark since the previous call), so
// between epochs the pool empties by itself. Under memory pressure the watcher
// sets the limit to 0 (which drains) while the tier is capped and restores it
// when the pressure is gone. So the daemon's resident set is bounded by the
// tier + fixed costs + the trimmer's slack + idleLimitBytes, plus, with the
// slabs on, their holes (a new slab is mapped only while the holes are within
// idleLimitBytes; released buffers can leave more: 4.7-9.3 MiB against a
// 4 MiB bound in the 64 MiB-tier soak, huge_page_slabs.h).
//
// Old bytes: a pooled buffer comes back with the bytes of the chunk it held.
// Its one producer (PosixSource::readChunk) reads the whole chunk into it and
// sizes it to what was read; nothing past size() is ever served, and the chunk
// is checksummed after the read as every chunk is.
//
// Thread-safety: every member is thread-safe (one mutex around the free
// lists, held for a few list operations; a source read takes hundreds of
// microseconds). global() lives for the process (never destroyed, so chunks
// freed during static destruction are safe).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/huge_page_slabs.h"
#include "cache/mutex.h"

namespace epochfs::cache {

class ChunkBufferPool {
 public:
  static constexpr size_t kPageBytes = 4096;
  static constexpr size_t kMinPooledBytes = 64 * 1024;
  static constexpr size_t kDefaultMaxBufferBytes = 1 << 20;

  struct Stats {
    uint64_t reused = 0;    // takes served from the pool
    uint64_t missed = 0;    // takes of a poolable size that found none
    uint64_t kept = 0;      // gives kept idle
    uint64_t freed = 0;     // gives freed at once (past the bound, or not poolable)
    uint64_t released = 0;  // idle buffers freed by releaseUnused/drain/limits
    size_t idleBytes = 0;
    size_t idleBuffers = 0;
  };

  explicit ChunkBufferPool(size_t idleLimitBytes = 0,
                           size_t maxBufferBytes = kDefaultMaxBufferBytes);
  ~ChunkBufferPool();
  ChunkBufferPool(const ChunkBufferPool&) = delete;
  ChunkBufferPool& operator=(const ChunkBufferPool&) = delete;

  // The one ChunkBuffer::pageAligned takes from and frees to; off (limit 0)
  // until the daemon configures it.
  static ChunkBufferPool& global();
  // The daemon's idle bound for a RAM tier of `tierBytes`.
  static size_t idleLimitFor(uint64_t tierBytes);

  // The capacity a page-aligned buffer of `size` bytes gets: the size class
  // when the pool is on and the size poolable, else `size` rounded to 4 KiB.
  size_t capacityFor(size_t size) const;
  // An idle block for `capacity` bytes (a capacityFor value): of that class
  // or one of the two above it, its size in *taken; nullptr when none is
  // idle. The caller owns it and gives it back (give) or frees it (std::free).
  char* take(size_t capacity, size_t* taken);
  // Fresh or reused memory for `capacity` bytes (a capacityFor value) from the
  // huge-page slabs, or nullptr when they are off or cannot (the caller uses
  // aligned_alloc). The caller owns it and gives it back (give).
  char* carve(size_t capacity) { return slabs_.carve(capacity); }
  // Buffers come from huge-page slabs from now on (the daemon turns them on
  // with the pool, not under AddressSanitizer); off by default.
  void enableHugePageSlabs(bool on) { slabs_.enable(on); }
  HugePageSlabs::Stats slabStats() const { return slabs_.stats(); }
  // Takes ownership of a page-aligned block of `capacity` bytes from
  // aligned_alloc or carve(): a carved one goes back to its slab; another is
  // kept idle if it is a class size, the pool is on and the bound allows,
  // else freed.
  void give(char* block, size_t capacity);

  // Frees every idle block and unmaps the empty slabs; returns the bytes freed.
  size_t drain();
  // Frees the idle bytes that were not reused since the previous call (the
  // low-water mark of idle bytes over the period) and unmaps the empty slabs;
  // returns the bytes freed.
  size_t releaseUnused();
  // A new bound (0 turns the pool off), for the idle blocks and the slabs'
  // holes alike; frees down to it at once.
  void setIdleLimit(size_t bytes);
  // Both bounds; buffers above maxBufferBytes bypass the pool from now on.
  void setLimits(size_t idleLimitBytes, size_t maxBufferBytes);

  size_t idleLimit() const { return idleLimit_.load(std::memory_order_relaxed); }
  Stats stats() const;

 private:
  // The class index of a page-rounded capacity, or -1 when not poolable.
  int classOf(size_t pageRounded, size_t maxBuffer) const;
  static size_t classCapacity(size_t pageRounded);
  static size_t capacityOfClass(size_t cls);
  // Takes idle blocks out, oldest of the largest classes first, until the
  // idle bytes are at most `target`; the caller frees them after unlocking
  // (a munmap each above 128 KiB).
  std::vector<char*> collectDownToLocked(size_t target) REQUIRES(mu_);
  // Frees down to `target`; returns the bytes freed.
  size_t freeDownTo(size_t target);

  std::atomic<size_t> idleLimit_;
  std::atomic<size_t> maxBufferBytes_;
  mutable Mutex mu_;
  std::vector<std::vector<char*>> idle_ GUARDED_BY(mu_);  // per class, newest at the back
  size_t idleBytes_ GUARDED_BY(mu_) = 0;
  size_t lowWater_ GUARDED_BY(mu_) = 0;   // least idleBytes_ since releaseUnused
  Stats counts_ GUARDED_BY(mu_);          // the counters
  std::atomic<uint64_t> bypassFreed_{0};  // gives freed without the lock (not keepable)
  HugePageSlabs slabs_;                   // carved buffers (off unless enabled); own lock
};

}  // namespace epochfs::cache
