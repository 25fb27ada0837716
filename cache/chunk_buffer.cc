#include "cache/chunk_buffer.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "cache/chunk_buffer_pool.h"

namespace epochfs::cache {

void ChunkBuffer::allocate(size_t size, size_t capacity, size_t alignment) {
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded =
      std::max<size_t>(alignment, (capacity + alignment - 1) / alignment * alignment);
  char* p = static_cast<char*>(std::aligned_alloc(alignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  mem_ = std::unique_ptr<char, Free>(p, Free{alignment == kPageBytes ? rounded : 0});
  size_ = size;
  capacity_ = rounded;
}

void ChunkBuffer::Free::operator()(char* p) const {
  if (pooledCapacity != 0) {
    ChunkBufferPool::global().give(p, pooledCapacity);
  } else {
    std::free(p);
  }
}

ChunkBuffer ChunkBuffer::pageAligned(size_t size) {
  ChunkBufferPool& pool = ChunkBufferPool::global();
  const size_t capacity = pool.capacityFor(size);
  ChunkBuffer b;
  size_t taken = 0;
  if (char* reused = pool.take(capacity, &taken)) {
    b.mem_ = std::unique_ptr<char, Free>(reused, Free{taken});
    b.size_ = size;
    b.capacity_ = taken;
    return b;
  }
  if (char* carved = pool.carve(capacity)) {
    b.mem_ = std::unique_ptr<char, Free>(carved, Free{capacity});
    b.size_ = size;
    b.capacity_ = capacity;
    return b;
  }
  b.allocate(size, capacity, kPageBytes);
  return b;
}

ChunkBuffer ChunkBuffer::copyOf(const void* bytes, size_t len) {
  ChunkBuffer b(len);
  if (len > 0) std::memcpy(b.data(), bytes, len);
  return b;
}

void ChunkBuffer::resize(size_t size) {
  if (size <= capacity_ && mem_ != nullptr) {
    size_ = size;
    return;
  }
  ChunkBuffer grown(size);
  if (size_ > 0) std::memcpy(grown.data(), data(), size_);
  *this = std::move(grown);
}

bool operator==(const ChunkBuffer& a, const std::vector<char>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace epochfs::cache
