// PlacementTable: bounded-load placement over the snapshot's files. The
// outcome fits (no node's owned bytes above 95 % of its capacity while the
// cluster holds the dataset), with nodes of different sizes and replicas; the
// table is the same whatever order the files were listed in; a dataset too
// large for the cluster falls back to plain rendezvous and says so; while it
// fits, every node owns its capacity share of the files by count, within
// kCountBand (2 %) or one file. Up to 16 members every member is a candidate
// (the tests with 4 and 8 nodes); past that, the ManyNodes* tests.
#include "transport/placement_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

namespace epochfs::transport {
namespace {

// Log-normal sizes around 110 KB, as a loader's image folder.
std::vector<FileBytes> dataset(int n, uint64_t* total) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> size(std::log(100000.0), 0.5);
  std::vector<FileBytes> files;
  *total = 0;
  for (int i = 0; i < n; ++i) {
    files.push_back({rng(), static_cast<uint64_t>(size(rng))});
    *total += files.back().bytes;
  }
  return files;
}

std::vector<Candidate> weighted(const std::vector<uint64_t>& caps) {
  std::vector<Candidate> live;
  for (size_t i = 0; i < caps.size(); ++i) {
    live.push_back({static_cast<uint32_t>(i), static_cast<double>(caps[i]) / 1073741824.0});
  }
  return live;
}

// Pass: at a cluster total of 1.1 D (the tightest the bound promises), with
// one node at half the size of the others, every node owns at most 95 % of
// its capacity and every file has exactly one owner.
TEST(PlacementTable, RealizedShareFitsEveryNode) {
  uint64_t d = 0;
  const auto files = dataset(2000, &d);
  const uint64_t big = d * 11 / 10 * 2 / 7;  // 3 big + 1 half = 3.5 big = 1.1 D
  const std::vector<uint64_t> caps = {big, big, big, big / 2};
  const auto t = PlacementTable::build(files, weighted(caps), caps, 1);
  ASSERT_TRUE(t.fits());
  uint64_t sum = 0;
  for (uint32_t n = 0; n < caps.size(); ++n) {
    EXPECT_LE(static_cast<double>(t.ownedBytes(n)), 0.95 * static_cast<double>(caps[n])) << n;
    EXPECT_GT(t.ownedBytes(n), 0u) << n;
    sum += t.ownedBytes(n);
  }
  EXPECT_EQ(sum, d);
  for (const auto& f : files) EXPECT_EQ(t.owners(f.fileId).size(), 1u);
}

// Pass: the same files in another order give the same owners (every node
// lists its snapshot in its own order); unknown files have none.
TEST(PlacementTable, IndependentOfListingOrder) {
  uint64_t d = 0;
  auto files = dataset(500, &d);
  const std::vector<uint64_t> caps = {d / 3, d / 3, d / 3, d / 3};
  const auto a = PlacementTable::build(files, weighted(caps), caps, 1);
  std::shuffle(files.begin(), files.end(), std::mt19937_64(3));
  const auto b = PlacementTable::build(files, weighted(caps), caps, 1);
  for (const auto& f : files) EXPECT_EQ(a.owners(f.fileId), b.owners(f.fileId));
  EXPECT_TRUE(a.owners(12345).empty());
  EXPECT_EQ(a.ownersOf(12345), nullptr);
}

// Pass: replicas are distinct nodes and each node still fits.
TEST(PlacementTable, ReplicasFitAndAreDistinct) {
  uint64_t d = 0;
  const auto files = dataset(1000, &d);
  const std::vector<uint64_t> caps(4, d * 2 / 3);
  const auto t = PlacementTable::build(files, weighted(caps), caps, 2);
  ASSERT_TRUE(t.fits());
  for (const auto& f : files) {
    const auto o = t.owners(f.fileId);
    ASSERT_EQ(o.size(), 2u);
    EXPECT_NE(o[0], o[1]);
  }
  for (uint32_t n = 0; n < 4; ++n) {
    EXPECT_LE(static_cast<double>(t.ownedBytes(n)), 0.95 * static_cast<double>(caps[n]));
  }
}

// Pass: a dataset larger than 95 % of the cluster does not fit: plain
// weighted rendezvous owners (the same as rendezvousOwners), fits() false;
// capacities unknown (0) also give plain rendezvous.
TEST(PlacementTable, TooLargeFallsBackToRendezvous) {
  uint64_t d = 0;
  const auto files = dataset(300, &d);
  const std::vector<uint64_t> caps(4, d / 5);
  const auto live = weighted(caps);
  const auto t = PlacementTable::build(files, live, caps, 1);
  EXPECT_FALSE(t.fits());
  for (const auto& f : files) EXPECT_EQ(t.owners(f.fileId), rendezvousOwners(f.fileId, live, 1));
  const std::vector<uint64_t> unknown(4, 0);
  std::vector<Candidate> equal(4);
  for (uint32_t i = 0; i < 4; ++i) equal[i] = {i, 1.0};
  const auto u = PlacementTable::build(files, equal, unknown, 1);
  EXPECT_FALSE(u.fits());
  for (const auto& f : files) EXPECT_EQ(u.owners(f.fileId), rendezvousOwners(f.fileId, equal, 1));
}

// Pass: a node leaving moves its own files and only a few others (spill).
TEST(PlacementTable, LeavingMovesLittleBeyondItsShare) {
  uint64_t d = 0;
  const auto files = dataset(2000, &d);
  const std::vector<uint64_t> caps(4, d / 2);
  const auto all = PlacementTable::build(files, weighted(caps), caps, 1);
  const std::vector<uint64_t> caps3(3, d / 2);
  const auto three = PlacementTable::build(files, weighted(caps3), caps3, 1);
  int moved = 0, ofLeaver = 0;
  for (const auto& f : files) {
    const uint32_t before = all.owners(f.fileId)[0], after = three.owners(f.fileId)[0];
    if (before == 3) {
      ++ofLeaver;
    } else if (before != after) {
      ++moved;
    }
  }
  EXPECT_GT(ofLeaver, 0);
  EXPECT_LE(moved, static_cast<int>(files.size()) / 20) << "files of staying nodes that moved";
}

// Files each node owns (replicas count once per owner).
std::vector<size_t> counts(const PlacementTable& t, const std::vector<FileBytes>& files,
                           size_t nodes) {
  std::vector<size_t> c(nodes, 0);
  for (const auto& f : files)
    for (uint32_t o : t.owners(f.fileId)) ++c.at(o);
  return c;
}

// Whether `count` is within the count band of `share`.
bool inBand(size_t count, double share) {
  const double slack = std::max(PlacementTable::kCountBand * share, 1.0);
  return static_cast<double>(count) <= share + slack && static_cast<double>(count) >= share - slack;
}

// Pass: 8 equal nodes, 2,000 files: every node owns 250 within the band,
// 245–255 (plain rendezvous scatters them by ~±15), and its bytes stay within
// its bound.
TEST(PlacementTable, EqualNodesOwnEqualCounts) {
  uint64_t d = 0;
  const auto files = dataset(2000, &d);
  const std::vector<uint64_t> caps(8, d * 3 / 16);  // 1.5 D over 8 nodes, as the lab
  const auto live = weighted(caps);
  std::vector<size_t> plain(8, 0);
  for (const auto& f : files) ++plain[rendezvousOwners(f.fileId, live, 1)[0]];
  ASSERT_GT(
      *std::max_element(plain.begin(), plain.end()) - *std::min_element(plain.begin(), plain.end()),
      10u)
      << "the hash alone should leave an imbalance to fix";
  const auto t = PlacementTable::build(files, live, caps, 1);
  ASSERT_TRUE(t.fits());
  for (size_t c : counts(t, files, 8)) EXPECT_TRUE(inBand(c, 250.0)) << c;
  int moved = 0;
  for (const auto& f : files) moved += t.owners(f.fileId) != rendezvousOwners(f.fileId, live, 1);
  EXPECT_LE(moved, 100) << "balancing moves only a few percent of the files";
  for (uint32_t n = 0; n < 8; ++n)
    EXPECT_LE(static_cast<double>(t.ownedBytes(n)), 0.95 * static_cast<double>(caps[n])) << n;
}

// Pass: counts follow capacity (one node twice the others: twice the files,
// within the band) and replicas stay distinct.
TEST(PlacementTable, CountsFollowCapacityWithReplicas) {
  uint64_t d = 0;
  const auto files = dataset(1500, &d);
  const std::vector<uint64_t> caps = {d, d / 2, d / 2, d / 2};  // 2.5 D for 2 replicas
  const auto t = PlacementTable::build(files, weighted(caps), caps, 2);
  ASSERT_TRUE(t.fits());
  const auto c = counts(t, files, 4);
  EXPECT_TRUE(inBand(c[0], 1200.0)) << c[0];  // 3,000 slots × 2/5
  for (size_t n = 1; n < 4; ++n) EXPECT_TRUE(inBand(c[n], 600.0)) << n << ": " << c[n];
  for (const auto& f : files) {
    const auto o = t.owners(f.fileId);
    ASSERT_EQ(o.size(), 2u);
    EXPECT_NE(o[0], o[1]);
  }
}

// Pass: with the byte bound tight (the cluster holds just over D / 0.95),
// balancing never pushes a node past its bound; counts still get close.
TEST(PlacementTable, BalancingKeepsTheByteBound) {
  uint64_t d = 0;
  const auto files = dataset(2000, &d);
  const std::vector<uint64_t> caps(8, static_cast<uint64_t>(static_cast<double>(d) / 8 / 0.94));
  const auto t = PlacementTable::build(files, weighted(caps), caps, 1);
  ASSERT_TRUE(t.fits());
  uint64_t sum = 0;
  for (uint32_t n = 0; n < 8; ++n) {
    EXPECT_LE(static_cast<double>(t.ownedBytes(n)), 0.95 * static_cast<double>(caps[n])) << n;
    sum += t.ownedBytes(n);
  }
  EXPECT_EQ(sum, d);
  for (size_t c : counts(t, files, 8)) EXPECT_NEAR(static_cast<double>(c), 250.0, 10.0);
}

std::vector<Candidate> equalNodes(uint32_t n) {
  std::vector<Candidate> live;
  for (uint32_t i = 0; i < n; ++i) live.push_back({i * 7 + 3, 1.0});  // ids not 0..n-1
  return live;
}

// Pass: 256 nodes (candidates from the ring), 200,000 files (781 a node, as
// 1 M over 1,024): every file has one owner, each node's count within the
// band and its bytes within its bound; the table does not depend on the
// listing order or on the order of the members.
TEST(PlacementTable, ManyNodesFitAndOwnTheirShare) {
  uint64_t d = 0;
  auto files = dataset(200000, &d);
  auto live = equalNodes(256);
  const std::vector<uint64_t> caps(256, d / 256 * 4 / 3);
  const auto t = PlacementTable::build(files, live, caps, 1);
  ASSERT_TRUE(t.fits());
  std::map<uint32_t, size_t> count;
  for (const auto& f : files) {
    const auto o = t.owners(f.fileId);
    ASSERT_EQ(o.size(), 1u);
    ++count[o[0]];
  }
  ASSERT_EQ(count.size(), 256u);
  for (const auto& c : live) {
    EXPECT_TRUE(inBand(count[c.nodeId], 200000.0 / 256)) << c.nodeId << ": " << count[c.nodeId];
    EXPECT_LE(static_cast<double>(t.ownedBytes(c.nodeId)), 0.95 * static_cast<double>(caps[0]));
  }
  std::shuffle(files.begin(), files.end(), std::mt19937_64(5));
  std::reverse(live.begin(), live.end());
  const auto again = PlacementTable::build(files, live, caps, 1);
  for (const auto& f : files) ASSERT_EQ(again.owners(f.fileId), t.owners(f.fileId));
}

// Pass: with 256 nodes a leaving node's files move and few others: at most
// 0.6 × its count more (measured: placement-bench's leave_ratio), and an
// unbalanced placement (no count band) would move none.
TEST(PlacementTable, ManyNodesLeaveMovesLittleMore) {
  uint64_t d = 0;
  const auto files = dataset(200000, &d);
  auto live = equalNodes(256);
  const std::vector<uint64_t> caps(256, d / 256 * 4 / 3);
  const auto all = PlacementTable::build(files, live, caps, 1);
  const uint32_t gone = live[100].nodeId;
  live.erase(live.begin() + 100);
  const auto after = PlacementTable::build(files, live, std::vector<uint64_t>(255, caps[0]), 1);
  ASSERT_TRUE(after.fits());
  size_t own = 0, moved = 0;
  for (const auto& f : files) {
    own += all.owners(f.fileId)[0] == gone;
    moved += all.owners(f.fileId) != after.owners(f.fileId);
  }
  ASSERT_GT(own, 0u);
  EXPECT_LE(static_cast<double>(moved), 1.6 * static_cast<double>(own)) << moved << " of " << own;
}

// Pass: 64 nodes of two sizes with 2 replicas: replicas distinct, counts
// follow capacity within the band, bytes within each bound; a dataset too
// large falls back to each file's best candidates (not scoring every node).
TEST(PlacementTable, ManyNodesWeightedReplicasAndFallback) {
  uint64_t d = 0;
  const auto files = dataset(50000, &d);
  std::vector<uint64_t> caps;
  for (int i = 0; i < 64; ++i) caps.push_back(i % 2 == 0 ? d / 32 : d / 16);  // 3 D for 2 replicas
  double total = 0;
  for (uint64_t c : caps) total += static_cast<double>(c);
  const auto live = weighted(caps);
  const auto t = PlacementTable::build(files, live, caps, 2);
  ASSERT_TRUE(t.fits());
  const auto c = counts(t, files, 64);
  for (uint32_t n = 0; n < 64; ++n) {
    const double share = 100000.0 * static_cast<double>(caps[n]) / total;
    EXPECT_TRUE(inBand(c[n], share)) << n << ": " << c[n] << " of " << share;
    EXPECT_LE(static_cast<double>(t.ownedBytes(n)), 0.95 * static_cast<double>(caps[n])) << n;
  }
  for (const auto& f : files) {
    const auto o = t.owners(f.fileId);
    ASSERT_EQ(o.size(), 2u);
    EXPECT_NE(o[0], o[1]);
  }
  const std::vector<uint64_t> small(64, d / 100);
  const auto over = PlacementTable::build(files, live, small, 1);
  EXPECT_FALSE(over.fits());
  for (const auto& f : files) ASSERT_EQ(over.owners(f.fileId).size(), 1u);
}

}  // namespace
}  // namespace epochfs::transport
