// Placement: which nodes own a file. Rendezvous (highest-random-weight)
// hashing: every live member scores each file with XXH3(fileId, nodeId),
// weighted by its capacity (score = -capacity / ln(u), u in (0,1)), and the
// K best own it. A member joining or leaving moves only its own share, and
// bigger caches get proportionally bigger shares. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

namespace epochfs::transport {

// A live member as placement sees it.
struct LiveMember {
  uint32_t id = 0;
  uint64_t capacityBytes = 0;  // 0: not announced
};

struct Candidate {
  uint32_t nodeId = 0;
  double weight = 1.0;  // relative capacity; > 0
};

// The `k` best owners of `fileId` among `live`, best first.
std::vector<uint32_t> rendezvousOwners(uint64_t fileId, const std::vector<Candidate>& live,
                                       unsigned k);

// The score of one node for one file (higher wins).
double rendezvousScore(uint64_t fileId, uint32_t nodeId, double weight);

}  // namespace epochfs::transport
