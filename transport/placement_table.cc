#include "transport/placement_table.h"

#include <algorithm>
#include <utility>

#include "transport/candidate_ring.h"
#include "transport/placement_assigner.h"

namespace epochfs::transport {
namespace {

bool ringLess(uint64_t a, uint64_t b) {
  const uint64_t pa = CandidateRing::position(a), pb = CandidateRing::position(b);
  return pa != pb ? pa < pb : a < b;
}

// `files` in ring order, each id once (the first listed counts): one radix
// pass on the position's top 16 bits (std::sort of 10 M pairs alone takes
// ~1 s), then each bucket (~150 files at 10 M) sorted on its own, the
// positions computed once per file into a bucket-sized scratch.
std::vector<FileBytes> inRingOrder(const std::vector<FileBytes>& files) {
  std::vector<size_t> start(65537, 0);
  for (const FileBytes& f : files) ++start[(CandidateRing::position(f.fileId) >> 48) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  std::vector<FileBytes> out(files.size());
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (const FileBytes& f : files) out[next[CandidateRing::position(f.fileId) >> 48]++] = f;
  struct Keyed {
    uint64_t position;
    uint64_t fileId;
    size_t listed;  // position in the bucket as listed: the first of a duplicate wins
  };
  std::vector<Keyed> keys;
  std::vector<FileBytes> bucket;
  size_t kept = 0;
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    const size_t begin = start[b], end = start[b + 1];
    keys.clear();
    bucket.assign(out.begin() + static_cast<long>(begin), out.begin() + static_cast<long>(end));
    for (size_t i = 0; i < bucket.size(); ++i)
      keys.push_back({CandidateRing::position(bucket[i].fileId), bucket[i].fileId, i});
    std::sort(keys.begin(), keys.end(), [](const Keyed& x, const Keyed& y) {
      if (x.position != y.position) return x.position < y.position;
      return x.fileId != y.fileId ? x.fileId < y.fileId : x.listed < y.listed;
    });
    for (size_t i = 0; i < keys.size(); ++i)
      if (i == 0 || keys[i].fileId != keys[i - 1].fileId) out[kept++] = bucket[keys[i].listed];
  }
  out.resize(kept);
  return out;
}

}  // namespace

PlacementTable PlacementTable::build(const std::vector<FileBytes>& files,
                                     const std::vector<Candidate>& live,
                                     const std::vector<uint64_t>& capacityBytes, unsigned k,
                                     double countBand) {
  PlacementTable t;
  const size_t n = live.size();
  t.k_ = static_cast<unsigned>(std::min<size_t>(k, n));
  if (n == 0 || t.k_ == 0) return t;
  const std::vector<FileBytes> order = inRingOrder(files);
  uint64_t dataset = 0;
  for (const auto& f : order) dataset += f.bytes;

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

  PlacementAssigner assigner(order, live, std::move(limit), t.k_, t.fits_);
  assigner.assign();
  if (t.fits_) assigner.balanceCounts(capacityBytes, countBand);

  t.ids_.reserve(order.size());
  for (const FileBytes& f : order) t.ids_.push_back(f.fileId);
  for (size_t i = 0; i < n; ++i)
    t.owned_[live[i].nodeId] = static_cast<uint64_t>(assigner.usedBytes()[i]);
  t.owners_ = assigner.takeOwners();
  for (uint32_t& o : t.owners_) o = live[o].nodeId;
  return t;
}

const uint32_t* PlacementTable::ownersOf(uint64_t fileId) const {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), fileId, ringLess);
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
