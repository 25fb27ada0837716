// Lease: the owner's side of an object lent to another component through a
// Revocable<T> (revocable.h), e.g. the Prefetcher lent to the RAM tier as its
// EvictionAdvisor. While the lease lives the borrower may call the object;
// end() (or the destructor) takes it back and returns once no call is using
// it, so the owner may destroy the object right after. Keep the lease beside
// the object it lent (declared after it, so it ends first). It shares the
// borrower's slot: ending it after the borrower is gone is harmless.
// Thread-safety: one lease is used by one thread at a time; end() blocks while
// a call to the object is in progress, so it must not be called from inside
// one.
#pragma once

#include <cstdint>
#include <memory>

namespace epochfs::cache {

class RevocableSlot;

class [[nodiscard]] Lease {
 public:
  Lease() = default;  // lends nothing
  Lease(std::shared_ptr<RevocableSlot> slot, uint64_t generation);
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&& other) noexcept;  // ends this lease first
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { end(); }

  // Takes the object back: from here the borrower sees none; returns once no
  // call uses it. Idempotent. A newer lease of the same borrower (it was lent
  // again since) is left as it is.
  void end();
  bool active() const { return slot_ != nullptr; }

 private:
  std::shared_ptr<RevocableSlot> slot_;
  uint64_t generation_ = 0;
};

}  // namespace epochfs::cache
