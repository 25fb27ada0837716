#include "cache/epoch_detector.h"

namespace epochfs::cache {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

// A read of chunk 0 this many reads of its shard after the chunk's first read
// in the generation is a re-read; sooner, it is a piece of the same read (12
// readers' 128 KiB pieces of 1 MiB chunks, all in one shard: 96 reads). In
// the shard's own reads, not the tier's: concurrent files that share a shard
// put all their pieces there.
constexpr uint64_t kSameReadSpan = 128;
// A generation is long (a re-read ends it) from half the previous one's first
// reads and half the capacity in bytes (shorter ones fit: LRU is right).

// At most 1/16 of the first reads (+4) re-read: still one read per epoch.
bool fewReReads(uint64_t reReads, uint64_t firstReads) { return reReads * 16 <= firstReads + 64; }
}  // namespace

void EpochDetector::onRead(Stamp& stamp, bool fileStart, uint64_t bytes, uint64_t clock) {
  const uint32_t gen = gen_.load(kRelaxed);
  if (stamp.gen != gen) {
    stamp.gen = gen;
    stamp.at = clock;
    reads_.fetch_add(1, kRelaxed);
    bytes_.fetch_add(bytes, kRelaxed);
    return;
  }
  if (!fileStart || clock - stamp.at < kSameReadSpan) return;  // the same read's pieces
  stamp.at = clock;  // the pieces of this re-read are not re-reads again
  reRead(gen, reads_.load(kRelaxed));
}

void EpochDetector::reRead(uint32_t gen, uint64_t now) {
  const uint64_t firstReads = now - genReads_.load(kRelaxed);
  const uint64_t bytes = bytes_.load(kRelaxed) - genBytes_.load(kRelaxed);
  const bool longEnough =
      firstReads >= lastLength_.load(kRelaxed) / 2 && bytes >= capacity_.load(kRelaxed) / 2;
  if (!longEnough) {
    const uint64_t reReads = reReads_.fetch_add(1, kRelaxed) + 1;
    if (!fewReReads(reReads, firstReads)) readFirst_.store(false, kRelaxed);
    return;
  }
  // An epoch boundary: one thread ends the generation.
  MutexLock lock(boundaryMu_);
  if (gen_.load(kRelaxed) != gen) return;
  readFirst_.store(fewReReads(reReads_.load(kRelaxed), firstReads), kRelaxed);
  lastLength_.store(firstReads, kRelaxed);
  genReads_.store(now, kRelaxed);
  genBytes_.store(bytes_.load(kRelaxed), kRelaxed);
  reReads_.store(0, kRelaxed);
  gen_.store(gen + 1, kRelaxed);
}

bool EpochDetector::readFirst() const {
  if (!readFirst_.load(kRelaxed)) return false;
  const uint64_t firstReads = reads_.load(kRelaxed) - genReads_.load(kRelaxed);
  return firstReads <= 2 * lastLength_.load(kRelaxed);
}

EpochDetector::State EpochDetector::state() const {
  State s;
  s.generation = gen_.load(kRelaxed);
  s.readFirst = readFirst();
  s.lastLength = lastLength_.load(kRelaxed);
  s.firstReads = reads_.load(kRelaxed) - genReads_.load(kRelaxed);
  s.reReads = reReads_.load(kRelaxed);
  return s;
}

}  // namespace epochfs::cache
