#include "prefetch/plan_tracker.h"

#include <algorithm>

#include "cache/eviction_advisor.h"

namespace epochfs::prefetch {

std::shared_ptr<PlanStream> PlanTracker::set(std::shared_ptr<const AccessPlan> plan,
                                             int64_t nowNs) {
  auto stream = std::make_shared<PlanStream>(std::move(plan), nowNs);
  {
    cache::MutexLock lock(streamsMu_);
    auto next = std::make_shared<Streams>();
    for (const auto& s : *streams_) {
      if (s->plan().rank() != stream->plan().rank() || s->plan().job() != stream->plan().job()) {
        next->push_back(s);
      } else {
        s->expire();
      }
    }
    next->push_back(stream);
    replace(std::move(next));
  }
  offPlanStreak_[stream->plan().job() % kJobSlots].store(0);
  return stream;
}

void PlanTracker::clear(std::optional<uint32_t> job) {
  cache::MutexLock lock(streamsMu_);
  auto next = std::make_shared<Streams>();
  for (const auto& s : *streams_) {
    if (job && s->plan().job() != *job) {
      next->push_back(s);
    } else {
      s->expire();
    }
  }
  replace(std::move(next));
}

void PlanTracker::remove(const std::shared_ptr<PlanStream>& stream) {
  cache::MutexLock lock(streamsMu_);
  auto next = std::make_shared<Streams>();
  for (const auto& s : *streams_) {
    if (s != stream) next->push_back(s);
  }
  stream->expire();
  replace(std::move(next));
}

void PlanTracker::replace(std::shared_ptr<const Streams> next) {
  live_.store(!next->empty());
  streams_ = std::move(next);
}

std::shared_ptr<const PlanTracker::Streams> PlanTracker::streams() const {
  cache::MutexLock lock(streamsMu_);
  return streams_;
}

PlanTracker::Match PlanTracker::nearest(uint64_t fileId, const Eligible& eligible,
                                        std::optional<uint32_t> job) const {
  Match best;
  best.distance = UINT64_MAX;
  // Held in a local: `for (x : *streams())` would free the list before the
  // loop body runs (the temporary shared_ptr dies with the range's init).
  const auto list = streams();
  for (const auto& s : *list) {
    if (job && s->plan().job() != *job) continue;
    if (s->plan().positionsOf(fileId) == nullptr) continue;
    best.planned = true;
    const auto p = nextEntry(*s, fileId, eligible);
    if (!p) continue;
    const uint64_t progress = s->progress();
    const uint64_t distance = *p > progress ? *p - progress : 0;
    if (distance < best.distance) best.stream = s, best.pos = *p, best.distance = distance;
  }
  return best;
}

std::optional<uint32_t> PlanTracker::nextEntry(const PlanStream& s, uint64_t fileId,
                                               const Eligible& eligible) {
  const auto* positions = s.plan().positionsOf(fileId);
  if (positions == nullptr) return std::nullopt;
  for (uint32_t p : *positions) {
    if (p < s.plan().start() || s.isConsumed(p) || (eligible && !eligible(s, p))) continue;
    return p;  // positions ascend: the first eligible one is this stream's nearest
  }
  return std::nullopt;
}

uint64_t PlanTracker::nextUse(uint64_t fileId) const {
  const Match m = nearest(fileId, nullptr);
  return m.stream ? m.distance : cache::EvictionAdvisor::kNever;
}

uint64_t PlanTracker::nextUseNs(uint64_t fileId) const {
  uint64_t best = cache::EvictionAdvisor::kNever;
  const auto list = streams();
  for (const auto& s : *list) {
    const auto p = nextEntry(*s, fileId, nullptr);
    if (!p) continue;
    const uint64_t progress = s->progress();
    const double entries = *p > progress ? static_cast<double>(*p - progress) : 0.0;
    // Below kNever even for a 2^32-entry plan at the 1 s-per-entry bound.
    best = std::min(best, static_cast<uint64_t>(entries * s->nsPerEntry()));
  }
  return best;
}

bool PlanTracker::offPlan(bool planned, uint32_t job) {
  std::atomic<uint64_t>& streak = offPlanStreak_[job % kJobSlots];
  if (planned) {
    streak.store(0, std::memory_order_relaxed);
    return false;
  }
  return streak.fetch_add(1, std::memory_order_relaxed) + 1 >= deviationReads_;
}

std::vector<StreamStats> PlanTracker::stats() const {
  std::vector<StreamStats> out;
  const auto list = streams();
  for (const auto& s : *list) out.push_back(s->stats());
  return out;
}

}  // namespace epochfs::prefetch
