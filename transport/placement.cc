#include "transport/placement.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace epochfs::transport {

double rendezvousScore(uint64_t fileId, uint32_t nodeId, double weight) {
  const uint64_t in[2] = {fileId, nodeId};
  const uint64_t h = XXH3_64bits(in, sizeof in);
  // u in (0, 1): 53 random bits, never 0 or 1.
  const double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
  return -weight / std::log(u);
}

std::vector<uint32_t> rendezvousOwners(uint64_t fileId, const std::vector<Candidate>& live,
                                       unsigned k) {
  std::vector<std::pair<double, uint32_t>> scored;
  scored.reserve(live.size());
  for (const auto& c : live)
    scored.emplace_back(rendezvousScore(fileId, c.nodeId, c.weight), c.nodeId);
  const size_t n = std::min<size_t>(k, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<long>(n), scored.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  std::vector<uint32_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace epochfs::transport
