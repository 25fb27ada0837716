#include "cache/revocable_slot.h"

namespace epochfs::cache {

namespace {

// Threads take the stripes in turn, once each: a thread keeps its stripe, so
// its increment and decrement stay on one cache line.
size_t stripeOfThisThread() {
  static std::atomic<size_t> next{0};
  thread_local const size_t mine =
      next.fetch_add(1, std::memory_order_relaxed) % RevocableSlot::kStripes;
  return mine;
}

}  // namespace

void* RevocableSlot::enter(size_t* stripe) {
  *stripe = stripeOfThisThread();
  stripes_[*stripe].calls.fetch_add(1);
  void* object = object_.load();
  if (object == nullptr) exit(*stripe);  // nothing to hold
  return object;
}

void RevocableSlot::exit(size_t stripe) {
  std::atomic<uint32_t>& calls = stripes_[stripe].calls;
  if (calls.fetch_sub(1) == 1 && revoking_.load()) calls.notify_all();
}

uint64_t RevocableSlot::lend(void* object) {
  MutexLock lock(mu_);
  revokeLocked();  // the previous object is free before the next is lent
  object_.store(object);
  return ++generation_;
}

void RevocableSlot::revoke(uint64_t generation) {
  MutexLock lock(mu_);
  if (generation != generation_) return;  // lent again since: revoked then
  revokeLocked();
  ++generation_;
}

void RevocableSlot::revokeLocked() {
  if (object_.load() == nullptr) return;
  revoking_.store(true);
  object_.store(nullptr);
  // A call that loaded the object before the store above has incremented its
  // stripe: wait for each stripe to be seen at zero once. Calls that begin now
  // see null and leave at once.
  for (Stripe& s : stripes_) {
    for (uint32_t n = s.calls.load(); n != 0; n = s.calls.load()) s.calls.wait(n);
  }
  revoking_.store(false);
}

}  // namespace epochfs::cache
