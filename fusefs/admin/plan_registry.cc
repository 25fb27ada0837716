#include "fusefs/admin/plan_registry.h"

#include <algorithm>

#include "fusefs/admin/admin_server.h"

namespace epochfs::fusefs {

using nlohmann::json;

void PlanRegistry::set(std::shared_ptr<const prefetch::AccessPlan> plan) {
  cache::MutexLock lock(mu_);
  plans_[{plan->job(), plan->rank()}] = std::move(plan);
}

void PlanRegistry::clear(uint32_t job) {
  cache::MutexLock lock(mu_);
  std::erase_if(plans_, [job](const auto& kv) { return kv.first.first == job; });
}

json PlanRegistry::summary(uint32_t job) const {
  cache::MutexLock lock(mu_);
  json out = json::array();
  for (const auto& [key, p] : plans_) {
    if (key.first != job) continue;
    out.push_back({{"rank", key.second},
                   {"epoch", p->epoch()},
                   {"start", p->start()},
                   {"length", p->size()},
                   {"bytes", p->totalBytes()}});
  }
  return {{"plans", out}};
}

json PlanRegistry::page(uint32_t job, int rank, uint64_t offset) const {
  std::shared_ptr<const prefetch::AccessPlan> p;
  {
    cache::MutexLock lock(mu_);
    auto it = plans_.find({job, rank});
    if (it == plans_.end()) {
      throw AdminError::notFound("no order registered for rank " + std::to_string(rank));
    }
    p = it->second;
  }
  json entries = json::array();
  const uint64_t end = std::min<uint64_t>(p->size(), offset + kPageEntries);
  for (uint64_t i = offset; i < end; ++i) {
    const prefetch::PlanEntry& e = p->at(i);
    entries.push_back({e.identity.fileId, e.identity.size, e.offset, e.length});
  }
  return {{"rank", rank},        {"epoch", p->epoch()},
          {"start", p->start()}, {"length", p->size()},
          {"entries", entries},  {"next_offset", end < p->size() ? json(end) : json(nullptr)}};
}

}  // namespace epochfs::fusefs
