// ReceiveBufferPool: reusable receive buffers for peer replies.
//
// A fresh 1 MiB buffer costs 256 first-touch page faults (the daemon's
// allocator hands blocks this large straight back to the kernel: fusefs
// boundAllocatorRetention), ~10 % of the peer fetch path's cycles. The pool
// keeps buffers that are no longer referenced and hands them out again as they
// are, already faulted in.
//
// A buffer leaves the pool for a reply (acquire), becomes the Chunk's data,
// and comes back when the last ChunkRef to that chunk goes (adopt wraps the
// chunk with a deleter that calls release): after a plain read, or when the
// RAM tier evicts it. The idle buffers are bounded by bytes (maxIdleBytes);
// a release beyond the bound frees the buffer. Buffers in use are accounted
// where they are (in flight, or as RAM-tier chunks), not here.
//
// Thread-safe. Chunks adopted by a pool may outlive it (they then free their
// data normally).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/chunk.h"
#include "cache/mutex.h"

namespace epochfs::transport {

class ReceiveBufferPool : public std::enable_shared_from_this<ReceiveBufferPool> {
 public:
  // Buffers smaller than this are not kept: they are cheap to allocate.
  static constexpr size_t kMinPooledBytes = 64 * 1024;

  static std::shared_ptr<ReceiveBufferPool> create(size_t maxIdleBytes);

  // A buffer of exactly `len` bytes, uninitialised (the caller overwrites
  // them all); a reused one keeps its old bytes.
  cache::ChunkBuffer acquire(size_t len);
  // Takes back a buffer nobody references any more: kept (LIFO: the most
  // recently used is the most likely to be in the CPU cache) while the idle
  // bytes stay within the bound, else freed.
  void release(cache::ChunkBuffer buffer);
  // The chunk as a ChunkRef whose last reference returns its data here.
  cache::ChunkRef adopt(std::unique_ptr<cache::Chunk> chunk);

  size_t idleBytes() const;
  size_t idleBuffers() const;
  size_t maxIdleBytes() const { return maxIdleBytes_; }
  uint64_t reused() const { return reused_.load(std::memory_order_relaxed); }
  uint64_t allocated() const { return allocated_.load(std::memory_order_relaxed); }

 private:
  explicit ReceiveBufferPool(size_t maxIdleBytes) : maxIdleBytes_(maxIdleBytes) {}

  const size_t maxIdleBytes_;
  mutable cache::Mutex mu_;
  std::vector<cache::ChunkBuffer> idle_ GUARDED_BY(mu_);
  size_t idleBytes_ GUARDED_BY(mu_) = 0;  // capacities of idle_
  std::atomic<uint64_t> reused_{0}, allocated_{0};
};

}  // namespace epochfs::transport
