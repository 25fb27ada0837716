// Revocable<T>: how a component holds an object it does not own and whose
// owner may take it back at any time: the RAM tier's EvictionAdvisor and
// OwnershipView, ChunkCache's PeerSource. The owner lends the object and
// keeps the returned Lease (lease.h); the borrower holds the object for the
// length of one call through a Use. Ending the lease waits for the Uses in
// progress, so no order of destruction lets the borrower call a dead object:
// the lifetime is in the types rather than in a "must outlive" comment.
// A Use costs one atomic increment and decrement on a per-thread stripe and
// one load (revocable_slot.h); hold it only for the call, never while waiting
// on something the owner's thread may be doing.
// Thread-safety: use() from any thread; lend() from any thread, blocking while
// calls to the previously lent object are in progress.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include "cache/lease.h"
#include "cache/revocable_slot.h"

namespace epochfs::cache {

template <typename T>
class Revocable {
 public:
  // The lent object for one call, or null. Not copyable or movable: it lives
  // in the scope of the call.
  class Use {
   public:
    ~Use() {
      if (object_ != nullptr) slot_.exit(stripe_);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

    T* get() const { return object_; }
    T* operator->() const { return object_; }
    explicit operator bool() const { return object_ != nullptr; }

   private:
    friend class Revocable;
    explicit Use(RevocableSlot& slot)
        : slot_(slot), object_(static_cast<T*>(slot.enter(&stripe_))) {}
    RevocableSlot& slot_;
    size_t stripe_ = 0;
    T* object_;
  };

  Revocable() : slot_(std::make_shared<RevocableSlot>()) {}
  Revocable(const Revocable&) = delete;
  Revocable& operator=(const Revocable&) = delete;

  // Lends `object` until the returned lease ends; a previous lending ends
  // here (waiting for its calls).
  Lease lend(T& object) {
    using Mutable = std::remove_const_t<T>;
    void* p = const_cast<Mutable*>(&object);
    return Lease(slot_, slot_->lend(p));
  }
  Use use() const { return Use(*slot_); }
  // Whether an object is lent now: a hint (it may be revoked right after).
  bool lent() const { return slot_->lent(); }

 private:
  std::shared_ptr<RevocableSlot> slot_;
};

}  // namespace epochfs::cache
