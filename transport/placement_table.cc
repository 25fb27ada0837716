#include "transport/placement_table.h"

#include <algorithm>
#include <utility>

namespace epochfs::transport {

PlacementTable PlacementTable::build(const std::vector<FileBytes>& files,
                                     const std::vector<Candidate>& live,
                                     const std::vector<uint64_t>& capacityBytes, unsigned k) {
  PlacementTable t;
  const size_t n = live.size();
  t.k_ = static_cast<unsigned>(std::min<size_t>(k, n));
  uint64_t dataset = 0;
  for (const auto& f : files) dataset += f.bytes;
  if (n == 0 || t.k_ == 0) return t;

  // Bounded load only when every live member announced its capacity.
  bool known = capacityBytes.size() == n;
  uint64_t total = 0;
  for (size_t i = 0; known && i < n; ++i) {
    known = capacityBytes[i] > 0;
    total += capacityBytes[i];
  }
  t.fits_ = known && holds(dataset, total, t.k_);
  std::vector<double> limit(n, 0);
  for (size_t i = 0; t.fits_ && i < n; ++i)
    limit[i] = kFill * static_cast<double>(capacityBytes[i]);
  std::vector<double> used(n, 0);

  // Id order: the same on every node whatever order its snapshot listed.
  std::vector<FileBytes> order(files);
  std::sort(order.begin(), order.end(),
            [](const FileBytes& a, const FileBytes& b) { return a.fileId < b.fileId; });

  t.ids_.reserve(files.size());
  t.owners_.reserve(files.size() * t.k_);
  std::vector<double> score(n);
  std::vector<char> taken(n);
  std::vector<size_t> picked;
  // The best not yet picked (ties: the lower node id), among those with
  // room for `bytes` when `bounded`; n if none.
  auto best = [&](double bytes, bool bounded) {
    size_t b = n;
    for (size_t i = 0; i < n; ++i) {
      if (taken[i] || (bounded && used[i] + bytes > limit[i])) continue;
      if (b == n || score[i] > score[b] ||
          (score[i] == score[b] && live[i].nodeId < live[b].nodeId))
        b = i;
    }
    return b;
  };
  for (const FileBytes& file : order) {
    const FileBytes* f = &file;
    if (!t.ids_.empty() && t.ids_.back() == f->fileId) continue;  // a duplicate: the first counts
    for (size_t i = 0; i < n; ++i)
      score[i] = rendezvousScore(f->fileId, live[i].nodeId, live[i].weight);
    std::fill(taken.begin(), taken.end(), 0);
    picked.clear();
    const double bytes = static_cast<double>(f->bytes);
    // The best owners with room; where there are not enough, the best by score.
    for (bool bounded : {t.fits_, false}) {
      while (picked.size() < t.k_) {
        const size_t i = best(bytes, bounded);
        if (i == n) break;
        taken[i] = 1;
        picked.push_back(i);
      }
    }
    t.ids_.push_back(f->fileId);
    for (size_t i : picked) {
      used[i] += bytes;
      t.owners_.push_back(live[i].nodeId);
    }
  }
  for (size_t i = 0; i < n; ++i) t.owned_[live[i].nodeId] = static_cast<uint64_t>(used[i]);
  return t;
}

bool PlacementTable::contains(uint64_t fileId) const {
  return std::binary_search(ids_.begin(), ids_.end(), fileId);
}

const uint32_t* PlacementTable::ownersOf(uint64_t fileId) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), fileId);
  if (it == ids_.end() || *it != fileId) return nullptr;
  return owners_.data() + static_cast<size_t>(it - ids_.begin()) * k_;
}

std::vector<uint32_t> PlacementTable::owners(uint64_t fileId) const {
  const uint32_t* o = ownersOf(fileId);
  return o == nullptr ? std::vector<uint32_t>{} : std::vector<uint32_t>(o, o + k_);
}

uint64_t PlacementTable::ownedBytes(uint32_t nodeId) const {
  auto it = owned_.find(nodeId);
  return it == owned_.end() ? 0 : it->second;
}

}  // namespace epochfs::transport
