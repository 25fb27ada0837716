#include "cache/lease.h"

#include <utility>

#include "cache/revocable_slot.h"

namespace epochfs::cache {

Lease::Lease(std::shared_ptr<RevocableSlot> slot, uint64_t generation)
    : slot_(std::move(slot)), generation_(generation) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    end();
    slot_ = std::move(other.slot_);
    generation_ = other.generation_;
  }
  return *this;
}

void Lease::end() {
  if (slot_ == nullptr) return;
  slot_->revoke(generation_);
  slot_.reset();
}

}  // namespace epochfs::cache
