// ChunkBuffer: the bytes of one chunk. Unlike std::vector<char> it is never
// zero-filled (a source read or a peer reply overwrites every byte, and a
// zero-fill of a fresh buffer costs a memset plus a page fault per 4 KiB), and
// it can be allocated page-aligned with room up to the next 4 KiB, so an
// O_DIRECT read lands in it straight from the device (no bounce buffer, no
// copy). Move-only: a chunk's bytes are shared through ChunkRef, not copied.
// Page-aligned buffers come from and go back to ChunkBufferPool::global()
// (chunk_buffer_pool.h: freed chunks' memory, already faulted in, reused by
// the next source read) or its huge-page slabs when enabled; with the pool
// on, their capacity is a size class.
//
// Thread-safety: none of its own (one owner at a time, like std::vector).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace epochfs::cache {

class ChunkBuffer {
 public:
  static constexpr size_t kPageBytes = 4096;

  ChunkBuffer() = default;
  // `size` bytes, uninitialised, aligned to 16 bytes (malloc's alignment).
  explicit ChunkBuffer(size_t size) { allocate(size, size, alignof(std::max_align_t)); }
  // `size` bytes, uninitialised, page-aligned, with capacity rounded up to a
  // whole page (to the pool's size class when the pool is on): what an
  // O_DIRECT read of `size` bytes needs. A reused buffer holds the old bytes
  // of a freed chunk: the caller overwrites every byte up to size().
  // Both throw std::bad_alloc when out of memory, as std::vector does.
  static ChunkBuffer pageAligned(size_t size);
  // A copy of `len` bytes at `bytes` (tests and small callers).
  static ChunkBuffer copyOf(const void* bytes, size_t len);
  static ChunkBuffer copyOf(const std::vector<char>& bytes) {
    return copyOf(bytes.data(), bytes.size());
  }

  // A moved-from buffer is empty (size 0, no memory).
  ChunkBuffer(ChunkBuffer&& o) noexcept
      : mem_(std::move(o.mem_)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  ChunkBuffer& operator=(ChunkBuffer&& o) noexcept {
    mem_ = std::move(o.mem_);
    size_ = std::exchange(o.size_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    return *this;
  }

  char* data() { return mem_.get(); }
  const char* data() const { return mem_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  char& operator[](size_t i) { return mem_.get()[i]; }
  char operator[](size_t i) const { return mem_.get()[i]; }

  // Shrinks in place, or grows into new storage (the first size() bytes kept,
  // the rest uninitialised).
  void resize(size_t size);

  friend bool operator==(const ChunkBuffer& a, const std::vector<char>& b);

 private:
  struct Free {
    // Page-aligned blocks go back to the pool (which frees what it does not
    // keep); the others to malloc.
    Free() noexcept : pooledCapacity(0) {}
    explicit Free(size_t capacity) noexcept : pooledCapacity(capacity) {}
    size_t pooledCapacity;  // 0: not page-aligned, plain free
    void operator()(char* p) const;
  };
  void allocate(size_t size, size_t capacity, size_t alignment);

  std::unique_ptr<char, Free> mem_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace epochfs::cache
