#include "transport/placement_assigner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace epochfs::transport {
namespace {

// Passes to alternatives before the last, any-member pass. Each pass settles most
// of what is left; the count of moves it makes falls quickly.
constexpr unsigned kAlternativePasses = 4;

}  // namespace

PlacementAssigner::PlacementAssigner(const std::vector<FileBytes>& files,
                                     const std::vector<Candidate>& live, std::vector<double> limit,
                                     unsigned k, bool fits)
    : files_(files), live_(live), ring_(live), limit_(std::move(limit)), k_(k), fits_(fits) {}

bool PlacementAssigner::owns(size_t file, uint32_t member) const {
  const auto begin = own_.begin() + static_cast<long>(file * k_);
  return std::find(begin, begin + k_, member) != begin + k_;
}

void PlacementAssigner::assign() {
  const size_t n = live_.size();
  own_.assign(files_.size() * k_, 0);
  alt_.assign(own_.size(), 0);
  altCloseness_.assign(own_.size(), 0);
  used_.assign(n, 0);
  for (size_t f = 0; f < files_.size(); ++f) {
    const double bytes = static_cast<double>(files_[f].bytes);
    const size_t base = f * k_;
    size_t got = 0;
    auto taken = [&](uint32_t m) {
      return std::find(own_.begin() + static_cast<long>(base),
                       own_.begin() + static_cast<long>(base + got),
                       m) != own_.begin() + static_cast<long>(base + got);
    };
    auto take = [&](uint32_t m) {
      own_[base + got++] = m;
      used_[m] += bytes;
    };
    ring_.candidates(files_[f].fileId, k_ + 1, cand_);
    if (fits_) {
      for (const auto& c : cand_)
        if (got < k_ && room(c.member, bytes)) take(c.member);
      // No candidate has room: the member with the most (rare while it fits).
      while (got < k_) {
        uint32_t best = static_cast<uint32_t>(n);
        for (uint32_t m = 0; m < n; ++m) {
          if (taken(m) || !room(m, bytes)) continue;
          const double free = limit_[m] - used_[m],
                       bestFree = best == n ? 0 : limit_[best] - used_[best];
          if (best == n || free > bestFree ||
              (free == bestFree && live_[m].nodeId < live_[best].nodeId))
            best = m;
        }
        if (best == n) break;
        take(best);
      }
    }
    for (const auto& c : cand_)
      if (got < k_ && !taken(c.member)) take(c.member);
    // Each slot's alternative: the best candidate that is not an owner.
    const auto alt = std::find_if(cand_.begin(), cand_.end(),
                                  [&](const CandidateRing::Scored& c) { return !taken(c.member); });
    for (size_t r = 0; r < k_; ++r) {
      const auto mine = std::find_if(cand_.begin(), cand_.end(),
                                     [&](const auto& c) { return c.member == own_[base + r]; });
      alt_[base + r] = alt == cand_.end() ? static_cast<uint32_t>(n) : alt->member;
      altCloseness_[base + r] = alt == cand_.end() ? 0.0f
                                : mine == cand_.end()
                                    ? std::numeric_limits<float>::infinity()
                                    : static_cast<float>(ring_.closeness(mine->score, alt->score));
    }
  }
}

void PlacementAssigner::move(size_t slot, uint32_t to) {
  const uint32_t from = own_[slot];
  const double bytes = static_cast<double>(files_[slot / k_].bytes);
  --count_[from];
  ++count_[to];
  used_[from] -= bytes;
  used_[to] += bytes;
  own_[slot] = to;
}

void PlacementAssigner::balanceCounts(const std::vector<uint64_t>& capacityBytes, double band) {
  const size_t n = live_.size();
  double total = 0;
  for (uint64_t c : capacityBytes) total += static_cast<double>(c);
  count_.assign(n, 0);
  for (uint32_t m : own_) ++count_[m];
  lo_.assign(n, 0);
  hi_.assign(n, 0);
  rich_.assign(n, 0);
  for (size_t m = 0; m < n; ++m) {
    const double share =
        static_cast<double>(own_.size()) * static_cast<double>(capacityBytes[m]) / total;
    const double slack = std::max(band * share, 1.0);
    hi_[m] = static_cast<size_t>(std::floor(share + slack));
    // Pulls come only from nodes the hash gave more than their share: a fixed
    // set, so a leave that shifts counts by a file or two rarely changes who
    // gives (measured: 1.60 → 1.54 of the leaver's files at 1 M × 1,024).
    rich_[m] = static_cast<double>(count_[m]) > share;
    lo_[m] = share > slack ? static_cast<size_t>(std::ceil(share - slack)) : 0;
  }
  auto settled = [&] {
    for (uint32_t m = 0; m < n; ++m)
      if (over(m) || under(m)) return false;
    return true;
  };
  for (unsigned pass = 0; pass < kAlternativePasses && !settled(); ++pass)
    if (alternativePass() == 0) break;
  if (!settled()) anyMemberPass();
}

size_t PlacementAssigner::alternativePass() {
  const size_t n = live_.size();
  bool anyUnder = false;
  for (uint32_t m = 0; m < n; ++m) anyUnder = anyUnder || under(m);
  moves_.clear();
  for (size_t slot = 0; slot < own_.size(); ++slot) {
    const uint32_t from = own_[slot], to = alt_[slot];
    if (to == n || from == to) continue;  // no alternative, or moved there already
    // Above its band: to an alternative below its top. Above its bottom: to
    // an alternative below its band.
    if (!(over(from) && count_[to] < hi_[to]) &&
        !(anyUnder && under(to) && rich_[from] && count_[from] > lo_[from]))
      continue;
    moves_.push_back({altCloseness_[slot], to, slot});
  }
  std::sort(moves_.begin(), moves_.end(), [](const Move& a, const Move& b) {
    return a.closeness != b.closeness ? a.closeness > b.closeness : a.slot < b.slot;
  });
  size_t made = 0;
  for (const Move& m : moves_) {
    const uint32_t from = own_[m.slot];
    const size_t file = m.slot / k_;
    const bool shed = over(from) && count_[m.to] < hi_[m.to];
    const bool pull = under(m.to) && rich_[from] && count_[from] > lo_[from];
    if (!(shed || pull) || owns(file, m.to)) continue;
    if (!room(m.to, static_cast<double>(files_[file].bytes))) continue;
    move(m.slot, m.to);
    ++made;
  }
  return made;
}

void PlacementAssigner::anyMemberPass() {
  const size_t n = live_.size();
  std::vector<uint32_t> byId(n);
  std::iota(byId.begin(), byId.end(), 0);
  std::sort(byId.begin(), byId.end(),
            [&](uint32_t a, uint32_t b) { return live_[a].nodeId < live_[b].nodeId; });
  auto anyUnder = [&] {
    return std::any_of(byId.begin(), byId.end(), [&](uint32_t m) { return under(m); });
  };
  bool pulling = anyUnder();
  for (size_t slot = 0; slot < own_.size(); ++slot) {
    const uint32_t o = own_[slot];
    const bool shed = over(o);
    if (!shed && !(pulling && count_[o] > lo_[o])) continue;
    const size_t file = slot / k_;
    const double bytes = static_cast<double>(files_[file].bytes);
    // Below its band first, then (when shedding) anyone below its top.
    uint32_t to = static_cast<uint32_t>(n);
    for (int want = 0; want < 2 && to == n; ++want) {
      if (want == 1 && !shed) break;
      for (uint32_t m : byId) {
        if (owns(file, m) || !room(m, bytes)) continue;
        if (want == 0 ? under(m) : count_[m] < hi_[m]) {
          to = m;
          break;
        }
      }
    }
    if (to == n) {
      pulling = pulling && anyUnder();
      continue;
    }
    move(slot, to);
    if (!under(to)) pulling = anyUnder();
  }
}

}  // namespace epochfs::transport
