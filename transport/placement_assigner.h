// PlacementAssigner: the work of PlacementTable::build over files already in
// ring order — bounded-load assignment, then count balancing — kept apart
// from the table that stores and looks up the result.
//
// assign(): each file, in ring order, to its best candidates with room below
// the byte limit (or, none having room, the member with the most room); with
// `fits` false, to its best candidates whatever their room. It keeps, for
// each owner slot, the file's best candidate that is not an owner (its
// alternative) and how close that one's claim comes (candidate_ring.h's
// closeness), 8 bytes a slot, so that balancing never hashes again.
// balanceCounts(): passes over the slots propose moving a slot to its
// alternative: from a node above its count band to one below its top, and to
// a node below its band from one the hash gave more than its share; the moves closest to a tie
// are made first, so a node gives up the files it holds by the narrowest
// margin, which a change of membership rarely reorders. What alternatives
// cannot settle a last pass settles with any member.
//
// Single-threaded; one use per build.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "transport/candidate_ring.h"
#include "transport/placement_table.h"

namespace epochfs::transport {

class PlacementAssigner {
 public:
  // `files` in ring order without duplicates; `limit`: each member's byte
  // bound (used only when `fits`).
  PlacementAssigner(const std::vector<FileBytes>& files, const std::vector<Candidate>& live,
                    std::vector<double> limit, unsigned k, bool fits);

  void assign();
  // Brings each member's slot count within `band` of its share of
  // `capacityBytes` (at least one slot either way), within the byte bounds.
  void balanceCounts(const std::vector<uint64_t>& capacityBytes, double band);

  // Owners as member indices, k per file in the files' order, best first;
  // handed over (no copy: 4 bytes a slot at 10 M files is 40 MB to touch).
  std::vector<uint32_t> takeOwners() { return std::move(own_); }
  const std::vector<double>& usedBytes() const { return used_; }

 private:
  struct Move {
    float closeness;
    uint32_t to;
    size_t slot;
  };
  bool room(uint32_t member, double bytes) const { return used_[member] + bytes <= limit_[member]; }
  bool owns(size_t file, uint32_t member) const;
  void move(size_t slot, uint32_t to);
  // One pass of moves to alternatives; the number made.
  size_t alternativePass();
  // Moves what the candidates could not, to any member.
  void anyMemberPass();
  bool over(uint32_t m) const { return count_[m] > hi_[m]; }
  bool under(uint32_t m) const { return count_[m] < lo_[m]; }

  const std::vector<FileBytes>& files_;
  const std::vector<Candidate>& live_;
  const CandidateRing ring_;
  const std::vector<double> limit_;
  const unsigned k_;
  const bool fits_;
  std::vector<double> used_;
  std::vector<uint32_t> own_;
  std::vector<uint32_t> alt_;        // per slot: the alternative (n: none)
  std::vector<float> altCloseness_;  // per slot: its closeness (∞: the owner is no candidate)
  std::vector<size_t> count_, lo_, hi_;
  std::vector<char> rich_;                   // above its share before balancing: may give to pulls
  std::vector<CandidateRing::Scored> cand_;  // scratch
  std::vector<Move> moves_;                  // scratch
};

}  // namespace epochfs::transport
