// PlacementTable: who owns each file of the dataset, so that the outcome fits.
// Rendezvous hashing weighted by capacity (placement.h) gives each node a
// share proportional to its cache in expectation, but a node's realized share
// scatters around that by the files' sizes and the hash; a node that gets more
// than its cache holds would evict its own share and re-read the source every
// epoch. So when the live members' capacities are known the table assigns
// files with bounded load: files in id order, each to its best-scoring owners
// that still have room below kFill of their capacity; only when no node has
// room (the dataset does not fit the cluster) does a file go to its plain
// rendezvous owners. Then, while the dataset fits, it balances the number of
// files each node owns: the hash alone leaves one node of eight ~6 % short
// at 2,000 files, and under locality-aware loading (docs/CLUSTER.md) a node
// short of its share takes in moved samples in every global batch, so its
// link sets the epoch. Each node's count goes to its capacity share by moving
// the files whose new owner scores closest to the old one, never past a
// node's byte bound; that moves a few percent of the files, so a member
// change still moves little more than rendezvous does. Every node holds the
// same snapshot and computes the same table; a node whose snapshot differs
// only places some files differently, and any member serves any file, so that
// costs transfers, never a read.
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

  // Whether `datasetBytes` × `replicas` fits kFill of `capacityBytes` (the
  // live members' sum): the test build() makes, for callers without a table.
  static bool holds(uint64_t datasetBytes, uint64_t capacityBytes, unsigned replicas) {
    return kFill * static_cast<double>(capacityBytes) >=
           static_cast<double>(datasetBytes) * replicas;
  }

  // Assigns `files` to `k` owners each among `live`. `capacityBytes[i]` is
  // live[i]'s cache in bytes (0 if unknown: then plain rendezvous, with the
  // candidates' weights).
  static PlacementTable build(const std::vector<FileBytes>& files,
                              const std::vector<Candidate>& live,
                              const std::vector<uint64_t>& capacityBytes, unsigned k);

  PlacementTable() = default;

  // The owners of `fileId`, best first; empty if the file is not in the table.
  std::vector<uint32_t> owners(uint64_t fileId) const;
  // The same without a copy: replicas() ids, or null if not in the table.
  const uint32_t* ownersOf(uint64_t fileId) const;
  bool contains(uint64_t fileId) const;
  // Bytes assigned to `nodeId` (replicas count once per owner).
  uint64_t ownedBytes(uint32_t nodeId) const;
  // False when the dataset (times the replicas) exceeds kFill of the live
  // members' capacity: some owners then hold more than their cache.
  bool fits() const { return fits_; }
  unsigned replicas() const { return k_; }

 private:
  // Sorted file ids (binary search: 8 bytes a file, not a hash node's ~40)
  // and k owners per file at the same position, best first.
  std::vector<uint64_t> ids_;
  std::vector<uint32_t> owners_;
  std::unordered_map<uint32_t, uint64_t> owned_;  // nodeId -> bytes
  // Moves owners from nodes above their count share to nodes below it
  // (`limit`: the byte bounds; `used`: bytes owned, kept up to date).
  void balanceCounts(const std::vector<FileBytes>& order, const std::vector<Candidate>& live,
                     const std::vector<uint64_t>& capacityBytes, const std::vector<double>& limit,
                     std::vector<double>& used);
  unsigned k_ = 0;
  bool fits_ = true;
};

}  // namespace epochfs::transport
