#include "prefetch/access_plan.h"

#include <algorithm>

namespace epochfs::prefetch {

AccessPlan::AccessPlan(int64_t epoch, int rank, uint64_t start, std::vector<PlanEntry> entries,
                       uint32_t job)
    : epoch_(epoch), rank_(rank), job_(job), start_(start), entries_(std::move(entries)) {
  positions_.reserve(entries_.size());
  cumBytes_.reserve(entries_.size() + 1);
  cumBytes_.push_back(0);
  for (size_t i = 0; i < entries_.size(); ++i) {
    totalBytes_ += entries_[i].length;
    cumBytes_.push_back(totalBytes_);
    positions_[entries_[i].identity.fileId].push_back(static_cast<uint32_t>(i));
  }
}

ChunkSpan chunkSpan(const PlanEntry& e, uint32_t chunkSize) {
  const uint64_t end = std::min(e.identity.size, e.offset + e.length);
  const uint64_t first = e.offset / chunkSize;
  if (end <= first * chunkSize) return {static_cast<uint32_t>(first), static_cast<uint32_t>(first)};
  return {static_cast<uint32_t>(first), static_cast<uint32_t>((end + chunkSize - 1) / chunkSize)};
}

const std::vector<uint32_t>* AccessPlan::positionsOf(uint64_t fileId) const {
  auto it = positions_.find(fileId);
  return it == positions_.end() ? nullptr : &it->second;
}

}  // namespace epochfs::prefetch
