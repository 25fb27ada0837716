#include "prefetch/fetch_budget.h"

namespace epochfs::prefetch {

bool FetchBudget::tryReserve(uint64_t bytes) {
  uint64_t cur = bytes_.load();
  do {
    if (cur > 0 && cur + bytes > capacity_) return false;
  } while (!bytes_.compare_exchange_weak(cur, cur + bytes));
  tasks_.fetch_add(1);
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (peak < cur + bytes && !peak_.compare_exchange_weak(peak, cur + bytes)) {
  }
  return true;
}

void FetchBudget::release(uint64_t bytes) {
  bytes_.fetch_sub(bytes);
  tasks_.fetch_sub(1);
}

}  // namespace epochfs::prefetch
