#include "transport/receive_buffer_pool.h"

#include <algorithm>

namespace epochfs::transport {

std::shared_ptr<ReceiveBufferPool> ReceiveBufferPool::create(size_t maxIdleBytes) {
  return std::shared_ptr<ReceiveBufferPool>(new ReceiveBufferPool(maxIdleBytes));
}

cache::ChunkBuffer ReceiveBufferPool::acquire(size_t len) {
  if (len >= kMinPooledBytes) {
    cache::MutexLock lock(mu_);
    // Newest first. Exact size: no resize at all. A larger one only within
    // 1/16 of `len`, so a short last chunk does not pin a full-size buffer.
    auto fits = [&](const cache::ChunkBuffer& b) {
      return b.size() == len || (b.capacity() >= len && b.capacity() - len <= len / 16);
    };
    for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
      if (!fits(*it)) continue;
      cache::ChunkBuffer b = std::move(*it);
      idle_.erase(std::next(it).base());
      idleBytes_ -= b.capacity();
      // Within the capacity: no copy, no fill.
      b.resize(len);
      reused_.fetch_add(1, std::memory_order_relaxed);
      return b;
    }
  }
  allocated_.fetch_add(1, std::memory_order_relaxed);
  // From the daemon's chunk-buffer pool (evicted chunks' buffers, already
  // faulted in) when it has one of the class; such a buffer goes back there
  // when it is freed.
  return cache::ChunkBuffer::pageAligned(len);
}

void ReceiveBufferPool::release(cache::ChunkBuffer buffer) {
  const size_t bytes = buffer.capacity();
  if (bytes < kMinPooledBytes) return;
  cache::MutexLock lock(mu_);
  if (idleBytes_ + bytes > maxIdleBytes_) return;  // freed on return, outside the bound
  idleBytes_ += bytes;
  idle_.push_back(std::move(buffer));
}

cache::ChunkRef ReceiveBufferPool::adopt(std::unique_ptr<cache::Chunk> chunk) {
  std::weak_ptr<ReceiveBufferPool> pool = weak_from_this();
  return cache::ChunkRef(chunk.release(), [pool](const cache::Chunk* c) {
    auto* owned = const_cast<cache::Chunk*>(c);  // allocated non-const by the caller
    if (auto p = pool.lock()) p->release(std::move(owned->data));
    delete owned;
  });
}

size_t ReceiveBufferPool::idleBytes() const {
  cache::MutexLock lock(mu_);
  return idleBytes_;
}

size_t ReceiveBufferPool::idleBuffers() const {
  cache::MutexLock lock(mu_);
  return idle_.size();
}

}  // namespace epochfs::transport
