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
  for (const auto& f : files) t.datasetBytes_ += f.bytes;
  if (n == 0 || t.k_ == 0) return t;

  // Bounded load only when every live member announced its capacity.
  bool known = capacityBytes.size() == n;
  double total = 0;
  for (size_t i = 0; known && i < n; ++i) {
    known = capacityBytes[i] > 0;
    total += static_cast<double>(capacityBytes[i]);
  }
  t.fits_ = known && kFill * total >= static_cast<double>(t.datasetBytes_) * t.k_;
  std::vector<double> limit(n, 0);
  for (size_t i = 0; t.fits_ && i < n; ++i)
    limit[i] = kFill * static_cast<double>(capacityBytes[i]);
  std::vector<double> used(n, 0);

  // Id order: the same on every node whatever order its snapshot listed.
  std::vector<const FileBytes*> order;
  order.reserve(files.size());
  for (const auto& f : files) order.push_back(&f);
  std::sort(order.begin(), order.end(),
            [](const FileBytes* a, const FileBytes* b) { return a->fileId < b->fileId; });

  t.ids_.reserve(files.size());
  t.owners_.reserve(files.size() * t.k_);
  std::vector<std::pair<double, size_t>> scored(n);
  std::vector<size_t> picked;
  for (const FileBytes* f : order) {
    if (!t.ids_.empty() && t.ids_.back() == f->fileId) continue;  // a duplicate: the first counts
    for (size_t i = 0; i < n; ++i) {
      scored[i] = {rendezvousScore(f->fileId, live[i].nodeId, live[i].weight), i};
    }
    std::sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : live[a.second].nodeId < live[b.second].nodeId;
    });
    picked.clear();
    const double bytes = static_cast<double>(f->bytes);
    if (t.fits_) {
      for (const auto& [score, i] : scored) {
        if (picked.size() == t.k_) break;
        if (used[i] + bytes <= limit[i]) picked.push_back(i);
      }
    }
    // Not enough room anywhere (or no bounds): the best by score.
    for (const auto& [score, i] : scored) {
      if (picked.size() == t.k_) break;
      if (std::find(picked.begin(), picked.end(), i) == picked.end()) picked.push_back(i);
    }
    t.ids_.push_back(f->fileId);
    for (size_t i : picked) {
      used[i] += bytes;
      t.owners_.push_back(live[i].nodeId);
      t.owned_[live[i].nodeId] += f->bytes;
    }
  }
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
