// RevocableSlot: the untyped core of Revocable<T> (revocable.h). Owns one
// pointer that an owner lends to a borrower, the count of the borrower's calls
// using it, and the revocation that clears the pointer and then waits until
// those calls have returned. The borrower and the owner's Lease (lease.h)
// share it, so either may be destroyed first.
//
// The calls are counted on 16 stripes of their own cache line, a thread always
// on the same one (as a big-reader lock), so that FUSE workers inserting
// chunks do not bounce one counter between cores. A call increments its
// stripe, then loads the pointer; revoke() clears the pointer, then waits
// until every stripe has been zero (both sequentially consistent: either the
// call sees null or revoke() sees the call).
//
// Thread-safety: enter()/exit() from any thread, lock-free and non-blocking.
// lend() and revoke() from any thread, serialized on a mutex; both block
// while calls to the previous object are in progress, so neither may be
// called from inside such a call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cache/mutex.h"

namespace epochfs::cache {

class RevocableSlot {
 public:
  RevocableSlot() = default;
  RevocableSlot(const RevocableSlot&) = delete;
  RevocableSlot& operator=(const RevocableSlot&) = delete;

  // A call begins: returns the lent object (null: none) and the stripe that
  // exit() must be given.
  void* enter(size_t* stripe);
  void exit(size_t stripe);
  // The pointer now, for a hint only (no call may use it).
  bool lent() const { return object_.load(std::memory_order_relaxed) != nullptr; }

  // Lends `object` (revoking what was lent before) and returns the lending's
  // generation, which revoke() is given.
  uint64_t lend(void* object) EXCLUDES(mu_);
  // Ends the lending of `generation` if it is still the current one: from
  // here calls see null, and this returns once no call uses the object.
  void revoke(uint64_t generation) EXCLUDES(mu_);

  static constexpr size_t kStripes = 16;  // of the call counts

 private:
  struct alignas(64) Stripe {
    std::atomic<uint32_t> calls{0};
  };
  void revokeLocked() REQUIRES(mu_);

  std::atomic<void*> object_{nullptr};
  std::atomic<bool> revoking_{false};  // exit() wakes revoke() only then
  Stripe stripes_[kStripes];
  Mutex mu_;  // serializes lend() and revoke(); never held by a call
  uint64_t generation_ GUARDED_BY(mu_) = 0;
};

}  // namespace epochfs::cache
