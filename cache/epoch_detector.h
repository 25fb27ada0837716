// EpochDetector: tells the RAM tier, when no order is registered, whether the
// reads come in epochs (every item read once per epoch, in a fresh order: a
// DistributedSampler's share) and which chunks the current epoch has read.
//
// Why: under such a workload a chunk the epoch has read already will not be
// read again before the next epoch, while the chunks it has not reached yet
// will be (with a fresh random subset per epoch: as likely as any). So the
// best victim is a chunk read in the current epoch; LRU instead evicts the
// coldest chunks, which are exactly the ones the epoch has not reached yet,
// and hits well below C/D. Evicting read chunks first keeps the start-of-epoch
// content until it is read: hit ratio ≈ C/D, the model's.
//
// The rule (its numbers: epoch_detector.cc). Reads are counted in
// *generations*, the epochs as the tier sees them. Each chunk carries a Stamp:
// the generation of its last read and when it was first read in it, on its
// shard's read clock (the shard's own hits and admissions: no shared counter
// is written per hit). A read of a chunk not yet read in the current
// generation is a *first read*. A *re-read* is a read of chunk
// 0 of a file already read in this generation, a good many reads earlier: a
// hit, or a miss on a chunk evicted in this generation (the shard keeps the
// stamps of its last evicted chunks, "ghosts"). The later pieces of one
// file's read (one FUSE request per 128 KiB, several chunks, another reader
// of the same file meanwhile) come within a few reads and are not re-reads.
// The tier sees no offsets, hence the distance; the kernel page cache only
// hides reads, it cannot create re-reads. A re-read ends the
// generation (an epoch boundary) once the generation is long, in first reads
// against the previous generation and in bytes against the tier's capacity;
// earlier re-reads are counted instead.
//
// Epoch mode (readFirst()) is decided at each boundary: on when the ended
// generation re-read only a small fraction of its first reads (a few stray
// re-reads: ranks out of step); off at once when the current generation
// re-reads more, and off while a generation runs far past the previous one
// (the epochs stopped). A workload with temporal locality (hot files re-read
// while others stream by) re-reads far more and stays on plain LRU, and so
// does one whose generations are small against the capacity (it fits).
//
// Thread-safety: all methods may be called concurrently; onRead() is called
// under a shard's lock and takes a lock of its own only at a boundary (once
// per generation). Stamps are the caller's, guarded by the caller's lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "cache/mutex.h"

namespace epochfs::cache {

class EpochDetector {
 public:
  // Per chunk: generation 0 is "never read" (generations start at 1).
  struct Stamp {
    uint32_t gen = 0;
    uint64_t at = 0;  // shard read clock at its first read (or last re-read)
  };
  // What the detector concluded, for tests and stats.
  struct State {
    uint32_t generation = 0;
    bool readFirst = false;
    uint64_t lastLength = 0;  // first reads of the previous generation
    uint64_t firstReads = 0;  // in the current generation
    uint64_t reReads = 0;     // in the current generation
  };

  explicit EpochDetector(uint64_t capacityBytes) : capacity_(capacityBytes) {}
  EpochDetector(const EpochDetector&) = delete;
  EpochDetector& operator=(const EpochDetector&) = delete;

  // The tier's owned capacity now (setCapacity): sizes a "long" generation.
  void setCapacity(uint64_t bytes) { capacity_.store(bytes, std::memory_order_relaxed); }
  uint32_t generation() const { return gen_.load(std::memory_order_relaxed); }
  // A read of a chunk of `bytes` bytes, chunk 0 of its file if `fileStart`
  // (an admitted chunk or a hit) at `clock` on its shard's read clock;
  // updates the chunk's stamp.
  void onRead(Stamp& stamp, bool fileStart, uint64_t bytes, uint64_t clock);
  // Evict chunks read in the current generation first (epoch mode, above).
  bool readFirst() const;
  State state() const;

 private:
  // A re-read in generation `gen` when the first reads counter is `now`.
  void reRead(uint32_t gen, uint64_t now);

  std::atomic<uint64_t> capacity_;
  std::atomic<uint32_t> gen_{1};
  std::atomic<uint64_t> reads_{0};       // first reads since start
  std::atomic<uint64_t> bytes_{0};       // their bytes
  std::atomic<uint64_t> genReads_{0};    // reads_ when this generation began
  std::atomic<uint64_t> genBytes_{0};    // bytes_ then
  std::atomic<uint64_t> reReads_{0};     // in this generation
  std::atomic<uint64_t> lastLength_{0};  // first reads of the previous generation
  std::atomic<bool> readFirst_{false};
  // One thread ends a generation; taken under a shard lock. Guards no member
  // (the counters are atomics).
  Mutex boundaryMu_;
};

}  // namespace epochfs::cache
