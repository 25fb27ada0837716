// SegmentedArray<T>: an array that grows without moving what it holds, so
// other threads may keep reading elements (and references to them) while it
// grows. Segment 0 holds indexes [0, 1024); segment k holds
// [1024·2^(k-1), 1024·2^k): at most twice the elements in use are allocated,
// and finding an element is a few bit operations.
//
// Elements are value-initialized when their segment is allocated, unless
// `kValueInit` is false: then they are left uninitialized (the caller writes
// an element before reading it; T must be trivial), so a segment's pages
// become resident only as they are written.
// Thread-safety: at() may allocate, from any thread (the segment is installed
// with a compare-and-swap, so two threads never install two); find() never
// allocates. Publishing an element's contents to other threads is the
// caller's business (e.g. an atomic count stored with release).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace epochfs::fusefs {

template <class T, bool kValueInit = true>
class SegmentedArray {
  static_assert(kValueInit || std::is_trivial_v<T>, "only a trivial T may be left uninitialized");

 public:
  SegmentedArray() = default;
  SegmentedArray(const SegmentedArray&) = delete;
  SegmentedArray& operator=(const SegmentedArray&) = delete;
  ~SegmentedArray() {
    for (auto& s : segments_) delete[] s.load(std::memory_order_acquire);
  }

  // The element at `i`, allocating its segment if needed.
  T& at(size_t i) {
    const Place p = place(i);
    T* seg = segments_[p.segment].load(std::memory_order_acquire);
    if (seg == nullptr) {
      T* fresh = kValueInit ? new T[segmentSize(p.segment)]() : new T[segmentSize(p.segment)];
      if (segments_[p.segment].compare_exchange_strong(seg, fresh, std::memory_order_acq_rel)) {
        seg = fresh;
      } else {
        delete[] fresh;  // another thread installed one first: `seg` is it
      }
    }
    return seg[p.offset];
  }

  // The element at `i`, whose segment must exist.
  const T& operator[](size_t i) const {
    const Place p = place(i);
    return segments_[p.segment].load(std::memory_order_acquire)[p.offset];
  }
  T& operator[](size_t i) {
    const Place p = place(i);
    return segments_[p.segment].load(std::memory_order_acquire)[p.offset];
  }

  // The element at `i`, or null when its segment was never allocated.
  T* find(size_t i) const {
    const Place p = place(i);
    T* seg = segments_[p.segment].load(std::memory_order_acquire);
    return seg == nullptr ? nullptr : seg + p.offset;
  }

 private:
  static constexpr size_t kFirstBits = 10;  // segment 0: 1024 elements
  static constexpr size_t kSegments = 64 - kFirstBits + 1;
  struct Place {
    size_t segment, offset;
  };
  static Place place(size_t i) {
    const size_t k = std::bit_width(i >> kFirstBits);
    return {k, k == 0 ? i : i - (size_t{1} << (kFirstBits + k - 1))};
  }
  static size_t segmentSize(size_t k) {
    return k == 0 ? size_t{1} << kFirstBits : size_t{1} << (kFirstBits + k - 1);
  }

  std::array<std::atomic<T*>, kSegments> segments_{};
};

}  // namespace epochfs::fusefs
