#include "transport/candidate_ring.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace epochfs::transport {
namespace {

constexpr uint64_t kPositionSeed = 0x65706f6368726e67ull;  // "epochrng"
constexpr double k53Bits = 9007199254740992.0;

// A point's place on the ring: 32 bits (8-byte points; ties go by node id).
uint32_t pointAt(uint32_t nodeId, uint64_t j) {
  const uint64_t in[2] = {nodeId, j};
  return static_cast<uint32_t>(XXH3_64bits_withSeed(in, sizeof in, kPositionSeed) >> 32);
}

}  // namespace

CandidateRing::CandidateRing(const std::vector<Candidate>& live) : live_(live) {
  const size_t n = live_.size();
  all_ = n <= kAllMembersUpTo;
  if (all_) return;
  double total = 0;
  for (const Candidate& c : live_) total += c.weight;
  // Points bucketed by their top 16 bits, then each bucket (~30 points at
  // 1,024 members) sorted: a third of the time std::sort of all takes.
  std::vector<uint64_t> count(n);
  bucketStart_.assign(65537, 0);
  for (uint32_t m = 0; m < n; ++m) {
    const double share =
        static_cast<double>(kPointsPerMember) * live_[m].weight * static_cast<double>(n) / total;
    count[m] = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(share)));
    for (uint64_t j = 0; j < count[m]; ++j) ++bucketStart_[(pointAt(live_[m].nodeId, j) >> 16) + 1];
  }
  for (size_t b = 1; b < bucketStart_.size(); ++b) bucketStart_[b] += bucketStart_[b - 1];
  points_.resize(bucketStart_.back());
  std::vector<uint32_t> next(bucketStart_.begin(), bucketStart_.end() - 1);
  for (uint32_t m = 0; m < n; ++m) {
    for (uint64_t j = 0; j < count[m]; ++j) {
      const uint32_t at = pointAt(live_[m].nodeId, j);
      points_[next[at >> 16]++] = {at, m};
    }
  }
  auto less = [&](const Point& a, const Point& b) {
    return a.at != b.at ? a.at < b.at : live_[a.member].nodeId < live_[b.member].nodeId;
  };
  for (size_t b = 0; b + 1 < bucketStart_.size(); ++b)
    std::sort(points_.begin() + bucketStart_[b], points_.begin() + bucketStart_[b + 1], less);
  // kWindowPoints of the mean member's points, for the member count rounded
  // up to a power of two: a leave or join below the next power keeps it.
  const uint64_t rounded = std::bit_ceil(static_cast<uint64_t>(n));
  window_ =
      static_cast<uint32_t>((uint64_t{1} << 32) / (kPointsPerMember * rounded) * kWindowPoints);
}

uint64_t CandidateRing::position(uint64_t fileId) {
  return XXH3_64bits_withSeed(&fileId, sizeof fileId, kPositionSeed);
}

double CandidateRing::score(uint64_t fileId, uint32_t member) const {
  const Candidate& c = live_[member];
  if (all_) return rendezvousScore(fileId, c.nodeId, c.weight);
  // Unweighted rendezvous without its logarithm: the same order, cheaper;
  // closeness() applies the logarithm where a ratio is needed.
  const uint64_t in[2] = {fileId, c.nodeId};
  return static_cast<double>(XXH3_64bits(in, sizeof in) >> 11);
}

double CandidateRing::closeness(double from, double to) const {
  if (all_) return to / from;
  // -1/ln(u) is the unweighted rendezvous score of u = (bits + 0.5) / 2^53.
  return std::log((from + 0.5) / k53Bits) / std::log((to + 0.5) / k53Bits);
}

size_t CandidateRing::firstPointFrom(uint32_t at) const {
  const size_t bucket = at >> 16;
  const auto begin = points_.begin() + bucketStart_[bucket];
  const auto end = points_.begin() + bucketStart_[bucket + 1];
  const auto it =
      std::lower_bound(begin, end, at, [](const Point& p, uint32_t x) { return p.at < x; });
  return static_cast<size_t>(it - points_.begin());
}

void CandidateRing::candidates(uint64_t fileId, size_t atLeast, std::vector<Scored>& out) const {
  out.clear();
  const size_t n = live_.size();
  if (all_) {
    for (uint32_t m = 0; m < n; ++m) out.push_back({m, score(fileId, m)});
  } else {
    atLeast = std::min(atLeast, n);
    const uint32_t at = static_cast<uint32_t>(position(fileId) >> 32);
    const size_t first = firstPointFrom(at);
    for (size_t step = 0; step < points_.size(); ++step) {
      size_t i = first + step;
      if (i >= points_.size()) i -= points_.size();
      const Point& p = points_[i];
      if (static_cast<uint32_t>(p.at - at) >= window_ && out.size() >= atLeast)
        break;  // unsigned: ring distance
      const bool seen = std::any_of(out.begin(), out.end(),
                                    [&](const Scored& s) { return s.member == p.member; });
      if (!seen) out.push_back({p.member, score(fileId, p.member)});
    }
  }
  std::sort(out.begin(), out.end(), [&](const Scored& a, const Scored& b) {
    return a.score != b.score ? a.score > b.score : live_[a.member].nodeId < live_[b.member].nodeId;
  });
}

}  // namespace epochfs::transport
