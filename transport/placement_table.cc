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
  if (t.fits_) t.balanceCounts(order, live, capacityBytes, limit, used);
  for (size_t i = 0; i < n; ++i) t.owned_[live[i].nodeId] = static_cast<uint64_t>(used[i]);
  return t;
}

// Integer file counts in proportion to capacity that sum to `slots`: each its
// floor, then the largest remainders (ties: the lower node id) one more.
static std::vector<size_t> countTargets(const std::vector<Candidate>& live,
                                        const std::vector<uint64_t>& capacityBytes, size_t slots) {
  const size_t n = capacityBytes.size();
  double total = 0;
  for (uint64_t c : capacityBytes) total += static_cast<double>(c);
  std::vector<size_t> target(n);
  std::vector<std::pair<double, size_t>> remainder(n);
  size_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(slots) * static_cast<double>(capacityBytes[i]) / total;
    target[i] = std::min(slots, static_cast<size_t>(exact));
    given += target[i];
    remainder[i] = {exact - static_cast<double>(target[i]), i};
  }
  std::sort(remainder.begin(), remainder.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : live[a.second].nodeId < live[b.second].nodeId;
  });
  for (size_t j = 0; given < slots; j = (j + 1) % n, ++given) ++target[remainder[j].second];
  return target;
}

void PlacementTable::balanceCounts(const std::vector<FileBytes>& order,
                                   const std::vector<Candidate>& live,
                                   const std::vector<uint64_t>& capacityBytes,
                                   const std::vector<double>& limit, std::vector<double>& used) {
  const size_t n = live.size();
  std::unordered_map<uint32_t, size_t> indexOf;
  for (size_t i = 0; i < n; ++i) indexOf.emplace(live[i].nodeId, i);
  std::vector<size_t> count(n, 0);
  for (uint32_t id : owners_) ++count[indexOf.at(id)];
  const std::vector<size_t> target = countTargets(live, capacityBytes, owners_.size());
  std::vector<double> bytesOf(ids_.size());
  for (size_t f = 0, at = 0; f < order.size() && at < ids_.size(); ++f)
    if (order[f].fileId == ids_[at]) bytesOf[at++] = static_cast<double>(order[f].bytes);

  // A move: owner slot `slot` (of file slot / k_) goes to node index `to`,
  // whose score for that file is `closeness` times its current owner's.
  struct Move {
    double closeness;
    size_t slot;
    size_t to;
  };
  std::vector<Move> moves;
  // Each pass proposes, for every slot of a node above its target, the
  // best-scoring node below its target that may take it, and makes the moves
  // closest to a tie first; later passes catch what earlier moves crowded out.
  for (unsigned pass = 0; pass < n; ++pass) {
    moves.clear();
    for (size_t s = 0; s < owners_.size(); ++s) {
      const size_t from = indexOf.at(owners_[s]);
      if (count[from] <= target[from]) continue;
      const size_t file = s / k_;
      const uint32_t* mine = owners_.data() + file * k_;
      const double own = rendezvousScore(ids_[file], live[from].nodeId, live[from].weight);
      size_t to = n;
      double best = 0;
      for (size_t j = 0; j < n; ++j) {
        if (count[j] >= target[j] || used[j] + bytesOf[file] > limit[j]) continue;
        if (std::find(mine, mine + k_, live[j].nodeId) != mine + k_) continue;
        const double score = rendezvousScore(ids_[file], live[j].nodeId, live[j].weight);
        if (to == n || score > best || (score == best && live[j].nodeId < live[to].nodeId)) {
          to = j;
          best = score;
        }
      }
      if (to != n) moves.push_back({best / own, s, to});
    }
    if (moves.empty()) return;
    std::sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) {
      return a.closeness != b.closeness ? a.closeness > b.closeness : a.slot < b.slot;
    });
    for (const Move& m : moves) {
      const size_t from = indexOf.at(owners_[m.slot]);
      const size_t file = m.slot / k_;
      const uint32_t* mine = owners_.data() + file * k_;
      if (count[from] <= target[from] || count[m.to] >= target[m.to]) continue;
      if (used[m.to] + bytesOf[file] > limit[m.to]) continue;
      if (std::find(mine, mine + k_, live[m.to].nodeId) != mine + k_) continue;
      owners_[m.slot] = live[m.to].nodeId;
      --count[from];
      ++count[m.to];
      used[from] -= bytesOf[file];
      used[m.to] += bytesOf[file];
    }
  }
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
