// CandidateRing: the few members that may own a file, from one hash of it.
// Scoring every member for every file (rendezvous over all, placement.h)
// costs O(files × members): ~200 s for 10 M files × 1,024 nodes. Here each
// member puts points on a 32-bit ring (kPointsPerMember for the mean weight,
// in proportion to its weight), a file hashes to a position, and its
// candidates are the distinct members with a point in the window of fixed
// width that starts there (about kWindowPoints points), extended past the
// window only when it holds fewer than the caller needs. Candidates are then
// ranked by rendezvous score. A member leaving removes its points and so
// only itself from candidate sets: the window's width depends on the member
// count rounded up to a power of two, so it stays put unless that changes.
//
// Up to kAllMembersUpTo members every member is a candidate and the ranking
// is weighted rendezvous, exactly rendezvousOwners(). Beyond that the weight
// is in the points (a member twice as large is a candidate twice as often)
// and candidates are ranked unweighted, so the weight counts once.
//
// Immutable after construction; every method may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/placement.h"

namespace epochfs::transport {

class CandidateRing {
 public:
  static constexpr size_t kAllMembersUpTo = 16;
  static constexpr uint64_t kPointsPerMember = 2048;
  static constexpr uint64_t kWindowPoints = 8;

  struct Scored {
    uint32_t member = 0;  // index into the members given to the constructor
    double score = 0;     // higher wins; compare only through closeness()
  };

  explicit CandidateRing(const std::vector<Candidate>& live);

  // Where a file sits: the table orders files by these 64 bits, the ring
  // places it by the top 32.
  static uint64_t position(uint64_t fileId);

  // The file's candidates, best first (ties: the lower node id): at least
  // min(atLeast, members) of them. `out` is replaced.
  void candidates(uint64_t fileId, size_t atLeast, std::vector<Scored>& out) const;

  // How close a claim scored `to` comes to one scored `from` for the same
  // file, as a ratio of rendezvous scores: 1 is a tie, smaller is farther.
  double closeness(double from, double to) const;

 private:
  struct Point {
    uint32_t at = 0;
    uint32_t member = 0;
  };
  double score(uint64_t fileId, uint32_t member) const;
  // The first point at or after `at` (points_.size() if none).
  size_t firstPointFrom(uint32_t at) const;

  std::vector<Candidate> live_;
  bool all_ = true;                    // every member is a candidate (the small case)
  std::vector<Point> points_;          // sorted by `at`
  std::vector<uint32_t> bucketStart_;  // first point of each top-16-bit bucket
  uint32_t window_ = 0;                // ring distance a window spans
};

}  // namespace epochfs::transport
