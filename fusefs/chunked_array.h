// ChunkedArray<T>: an array of up to kMaxChunks << kChunkBits elements kept in
// fixed-size chunks that never move, so readers may hold references while it
// grows, and growing never copies (a vector's doubling would hold the old and
// the new array at once: 3x the memory at the step). A chunk is allocated
// when an index in it is first written, its elements value-initialized unless
// `kValueInit` is false: then they are left uninitialized (the caller writes
// an element before reading it; T must be trivial), so a chunk's pages become
// resident only as they are written and a large chunk costs only what is used
// of it.
//
// Thread-safety: at() allocates from any thread (a chunk is installed with a
// compare-and-swap); find() and operator[] never allocate. Publishing an
// element's contents to other threads is the caller's business (e.g. a count
// stored with release after the element is written).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace epochfs::fusefs {

template <class T, unsigned kChunkBits, size_t kMaxChunks, bool kValueInit = true>
class ChunkedArray {
  static_assert(kValueInit || std::is_trivial_v<T>, "only a trivial T may be left uninitialized");

 public:
  static constexpr size_t kChunkSize = size_t{1} << kChunkBits;
  static constexpr size_t kCapacity = kMaxChunks * kChunkSize;

  ChunkedArray() : chunks_(new std::atomic<T*>[kMaxChunks]()) {}
  ChunkedArray(const ChunkedArray&) = delete;
  ChunkedArray& operator=(const ChunkedArray&) = delete;
  ~ChunkedArray() {
    for (size_t c = 0; c < kMaxChunks; ++c) delete[] chunks_[c].load(std::memory_order_acquire);
  }

  // The element at `i` (< kCapacity), allocating its chunk if needed.
  T& at(size_t i) {
    std::atomic<T*>& slot = chunks_[i >> kChunkBits];
    T* chunk = slot.load(std::memory_order_acquire);
    if (chunk == nullptr) {
      T* fresh = kValueInit ? new T[kChunkSize]() : new T[kChunkSize];
      if (slot.compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel)) {
        chunk = fresh;
      } else {
        delete[] fresh;  // another thread installed one first: `chunk` is it
      }
    }
    return chunk[i & (kChunkSize - 1)];
  }

  // The element at `i`, or null when its chunk was never allocated.
  T* find(size_t i) const {
    if (i >= kCapacity) return nullptr;
    T* chunk = chunks_[i >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : chunk + (i & (kChunkSize - 1));
  }

  // The element at `i`, whose chunk must exist.
  const T& operator[](size_t i) const {
    return chunks_[i >> kChunkBits].load(std::memory_order_acquire)[i & (kChunkSize - 1)];
  }
  T& operator[](size_t i) {
    return chunks_[i >> kChunkBits].load(std::memory_order_acquire)[i & (kChunkSize - 1)];
  }

 private:
  std::unique_ptr<std::atomic<T*>[]> chunks_;
};

}  // namespace epochfs::fusefs
