#include "prefetch/plan_stream.h"

#include <algorithm>
#include <cassert>

namespace epochfs::prefetch {

PlanStream::PlanStream(std::shared_ptr<const AccessPlan> plan, int64_t nowNs)
    : plan_(std::move(plan)), state_(new std::atomic<uint8_t>[plan_->size()]) {
  for (size_t i = 0; i < plan_->size(); ++i) state_[i].store(0, std::memory_order_relaxed);
  issued_ = plan_->start();
  sweptTo_.store(plan_->start());
  lastProgressNs_.store(nowNs);
  rateSinceNs_ = nowNs;
}

uint64_t PlanStream::consume(uint32_t pos) {
  const uint8_t before = state_[pos].fetch_or(kConsumed);
  if ((before & kConsumed) != 0) return 0;
  if (before & kPrefetched) ahead_.fetch_sub(1, std::memory_order_relaxed);
  uint64_t h = highest_.load(std::memory_order_relaxed);
  while (h < pos + 1u && !highest_.compare_exchange_weak(h, pos + 1u)) {
  }
  return consumed_.fetch_add(1, std::memory_order_relaxed) + 1;
}

void PlanStream::markPrefetched(uint32_t pos) {
  if ((state_[pos].fetch_or(kPrefetched) & kConsumed) == 0) {
    ahead_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool PlanStream::markOpened(uint32_t pos) { return (state_[pos].fetch_or(kOpened) & kPushed) != 0; }

bool PlanStream::markPushed(uint32_t pos) {
  const uint8_t before = state_[pos].fetch_or(kPushed);
  assert((before & kPrefetched) != 0 && "an entry is pushed only after it was fetched");
  return (before & kOpened) != 0;
}

bool PlanStream::claimSweep(uint64_t target, uint64_t* from) {
  uint64_t f = sweptTo_.load();
  do {
    if (f >= target) return false;
  } while (!sweptTo_.compare_exchange_weak(f, target));
  *from = f;
  return true;
}

void PlanStream::countFetched(uint64_t bytes) {
  prefetchedFiles_.fetch_add(1, std::memory_order_relaxed);
  prefetchedBytes_.fetch_add(bytes, std::memory_order_relaxed);
}

bool PlanStream::idleLongerThan(int64_t nowNs, double seconds) const {
  return nowNs - lastProgressNs_.load() > static_cast<int64_t>(seconds * 1e9);
}

void PlanStream::updateRate(int64_t nowNs) {
  if (nowNs - rateSinceNs_ <= 1000000000) return;
  const uint64_t c = consumed_.load();
  const double rate =
      static_cast<double>(c - rateSinceConsumed_) * 1e9 / static_cast<double>(nowNs - rateSinceNs_);
  const double old = filesPerSecond_.load();
  filesPerSecond_.store(old == 0 ? rate : 0.7 * old + 0.3 * rate);
  rateSinceNs_ = nowNs;
  rateSinceConsumed_ = c;
}

double PlanStream::nsPerEntry() const {
  const double rate = filesPerSecond_.load(std::memory_order_relaxed);
  return rate > 0 ? std::min(1e9 / rate, 1e9) : 1e6;
}

StreamStats PlanStream::stats() const {
  StreamStats st;
  st.epoch = plan_->epoch();
  st.rank = plan_->rank();
  st.job = plan_->job();
  st.length = plan_->size();
  st.start = plan_->start();
  st.consumed = consumed_.load();
  st.position = progress();
  st.leadFiles = ahead_.load();
  const double rate = filesPerSecond_.load();
  st.leadSeconds = rate > 0 ? static_cast<double>(st.leadFiles) / rate : 0;
  st.stalls = stalls_.load();
  st.hits = hits_.load();
  st.prefetchedFiles = prefetchedFiles_.load();
  st.prefetchedBytes = prefetchedBytes_.load();
  st.expired = expired_.load();
  return st;
}

}  // namespace epochfs::prefetch
