// PlacementTable: who owns each file of the dataset, so that the outcome fits
// and every node computes it in time near linear in the files.
//
// Each file has a few candidate owners from one hash (candidate_ring.h:
// every member up to 16, else the members with a point in the file's window
// of a hash ring), ranked by rendezvous score. Rendezvous alone gives each
// node its capacity share in expectation, but a node's realized share
// scatters around that by the files' sizes and the hash; a node that gets more
// than its cache holds would evict its own share and re-read the source every
// epoch. So when the live members' capacities are known the table assigns
// files with bounded load: files in ring order, each to its best candidates
// that still have room below kFill of their capacity (a file none of whose
// candidates has room goes to the member with the most room); only when the
// dataset does not fit the cluster does a file go to its best candidates
// regardless (with up to 16 members: plain rendezvous). Then, while the
// dataset fits, it brings the number of files each node owns to within
// kCountBand of its capacity share: under locality-aware loading
// (docs/CLUSTER.md) a node short of its share takes in moved samples in
// every global batch, so its link sets the epoch. Moves go between a file's
// candidates, the closest to a tie first, never past a node's byte bound; a
// node leaving moves its own files and few more.
//
// Every node holds the same snapshot and computes the same table; a node
// whose snapshot differs only places some files differently, and any member
// serves any file, so that costs transfers, never a read.
//
// Thread-compatible: build() makes a new assignment; lookups on a built table
// may run concurrently (UcxCluster swaps tables under its live lock).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "transport/placement.h"

namespace epochfs::transport {

struct FileBytes {
  uint64_t fileId = 0;
  uint64_t bytes = 0;
};

class PlacementTable {
 public:
  // The most of a node's capacity its owned files may fill while the dataset
  // fits the cluster: the rest is room for guests and for uneven chunk sizes.
  static constexpr double kFill = 0.95;
  // While the dataset fits, each node owns its capacity share of the file
  // slots within this fraction of the share, or one file if that is more.
  static constexpr double kCountBand = 0.02;

  // Whether `datasetBytes` × `replicas` fits kFill of `capacityBytes` (the
  // live members' sum): the test build() makes, for callers without a table.
  static bool holds(uint64_t datasetBytes, uint64_t capacityBytes, unsigned replicas) {
    return kFill * static_cast<double>(capacityBytes) >=
           static_cast<double>(datasetBytes) * replicas;
  }

  // Assigns `files` to `k` owners each among `live`. `capacityBytes[i]` is
  // live[i]'s cache in bytes (0 if unknown: then the best candidates, with
  // the candidates' weights). A file id listed twice counts once.
  // `countBand`: kCountBand but for placement-bench's trade-off of the band
  // against a leave's churn.
  static PlacementTable build(const std::vector<FileBytes>& files,
                              const std::vector<Candidate>& live,
                              const std::vector<uint64_t>& capacityBytes, unsigned k,
                              double countBand = kCountBand);

  PlacementTable() = default;

  // The owners of `fileId`, best first; empty if the file is not in the table.
  std::vector<uint32_t> owners(uint64_t fileId) const;
  // The same without a copy: replicas() ids, or null if not in the table.
  const uint32_t* ownersOf(uint64_t fileId) const;
  bool contains(uint64_t fileId) const { return ownersOf(fileId) != nullptr; }
  // Bytes assigned to `nodeId` (replicas count once per owner).
  uint64_t ownedBytes(uint32_t nodeId) const;
  // False when the dataset (times the replicas) exceeds kFill of the live
  // members' capacity: some owners then hold more than their cache.
  bool fits() const { return fits_; }
  unsigned replicas() const { return k_; }

 private:
  // File ids in ring order (CandidateRing::position, then id: a binary search
  // hashes the ids it visits, so the table keeps 8 bytes a file) and k owners
  // per file at the same position, best first.
  std::vector<uint64_t> ids_;
  std::vector<uint32_t> owners_;
  std::unordered_map<uint32_t, uint64_t> owned_;  // nodeId -> bytes
  unsigned k_ = 0;
  bool fits_ = true;
};

}  // namespace epochfs::transport
