// RequestTable: the requests in flight (request_table.h).
#include "transport/request_table.h"

#include <algorithm>

namespace epochfs::transport {

bool PendingFetch::waitUntil(Clock::time_point until) {
  cache::MutexLock lock(mu);
  return cv.waitUntil(mu, until, [&]() REQUIRES(mu) { return done; });
}

RequestTable::RequestTable(size_t members, unsigned maxInFlightPerPeer)
    : maxInFlightPerPeer_(maxInFlightPerPeer), inFlight_(members, 0) {}

uint64_t RequestTable::add(const std::shared_ptr<PendingFetch>& p) {
  p->reqId = nextReqId_++;
  pending_[p->reqId] = p;
  ++inFlight_[p->peer];
  return p->reqId;
}

std::shared_ptr<PendingFetch> RequestTable::find(uint64_t reqId) const {
  auto it = pending_.find(reqId);
  return it == pending_.end() ? nullptr : it->second;
}

void RequestTable::complete(const std::shared_ptr<PendingFetch>& p, cache::Status s) {
  if (p->reqId != 0 && pending_.erase(p->reqId) > 0 && inFlight_[p->peer] > 0) {
    --inFlight_[p->peer];
  }
  cache::MutexLock lock(p->mu);
  if (p->done) return;
  p->status = std::move(s);
  p->done = true;
  p->cv.notifyAll();
}

std::vector<std::shared_ptr<PendingFetch>> RequestTable::expired(Clock::time_point now) const {
  std::vector<std::shared_ptr<PendingFetch>> out;
  for (const auto& [id, p] : pending_) {
    if (p->deadline <= now) out.push_back(p);
  }
  return out;
}

void RequestTable::failPeer(uint32_t peer, const cache::Status& s) {
  std::vector<std::shared_ptr<PendingFetch>> mine;
  for (const auto& [id, p] : pending_) {
    if (p->peer == peer) mine.push_back(p);
  }
  for (const auto& p : mine) complete(p, s);
  inFlight_[peer] = 0;
}

void RequestTable::failAll(const cache::Status& s) {
  std::vector<std::shared_ptr<PendingFetch>> all;
  for (const auto& [id, p] : pending_) all.push_back(p);
  for (const auto& p : all) complete(p, s);
}

RequestTable::Clock::time_point RequestTable::nextDeadline(Clock::time_point bound) const {
  for (const auto& [id, p] : pending_) bound = std::min(bound, p->deadline);
  return bound;
}

}  // namespace epochfs::transport
