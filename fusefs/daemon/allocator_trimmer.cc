#include "fusefs/daemon/allocator_trimmer.h"

#include <malloc.h>

#include <algorithm>

#include "cache/chunk_buffer_pool.h"

namespace epochfs::fusefs {

uint64_t AllocatorTrimmer::slackFor(uint64_t tierBytes) {
  return std::max<uint64_t>(tierBytes / 16, uint64_t{16} << 20);
}

AllocatorTrimmer::AllocatorTrimmer(uint64_t slackBytes, std::chrono::milliseconds period)
    : slackBytes_(slackBytes), period_(period) {}

AllocatorTrimmer::~AllocatorTrimmer() { stop(); }

void AllocatorTrimmer::start() {
  thread_.start(period_, [this] { pollOnce(); });
}

void AllocatorTrimmer::stop() { thread_.stop(); }

bool AllocatorTrimmer::pollOnce() {
  // Chunk buffers the pool kept but nobody took this period go back first,
  // so a trim below can return their pages (the pool is the newest memory
  // the daemon holds idle; between epochs it empties here).
  cache::ChunkBufferPool::global().releaseUnused();
  // mallinfo2 walks the arenas' free lists: a few microseconds once a period.
  const struct mallinfo2 info = mallinfo2();
  if (info.fordblks <= slackBytes_) return false;
  malloc_trim(0);
  ++trims_;
  return true;
}

}  // namespace epochfs::fusefs
