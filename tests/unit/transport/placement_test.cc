#include "transport/placement.h"

#include <gtest/gtest.h>

#include <map>

namespace epochfs::transport {
namespace {

std::vector<Candidate> nodes(uint32_t n) {
  std::vector<Candidate> v;
  for (uint32_t i = 0; i < n; ++i) v.push_back({i, 1.0});
  return v;
}

TEST(Placement, BalancedAndDeterministic) {
  std::map<uint32_t, int> share;
  for (uint64_t f = 0; f < 30000; ++f) {
    auto o = rendezvousOwners(f * 0x9e3779b97f4a7c15ull, nodes(3), 1);
    ASSERT_EQ(o.size(), 1u);
    EXPECT_EQ(o, rendezvousOwners(f * 0x9e3779b97f4a7c15ull, nodes(3), 1));
    ++share[o[0]];
  }
  for (auto& [n, c] : share) EXPECT_NEAR(c, 10000, 500) << "node " << n;
}

TEST(Placement, LeavingMovesOnlyItsShare) {
  auto all = nodes(4);
  auto without2 = all;
  without2.erase(without2.begin() + 2);
  for (uint64_t f = 1; f < 5000; ++f) {
    const uint32_t before = rendezvousOwners(f, all, 1)[0];
    const uint32_t after = rendezvousOwners(f, without2, 1)[0];
    if (before != 2) {
      EXPECT_EQ(before, after);
    }
    EXPECT_NE(after, 2u);
  }
}

TEST(Placement, ReplicasAreDistinctAndPrefixStable) {
  for (uint64_t f = 1; f < 1000; ++f) {
    auto two = rendezvousOwners(f, nodes(4), 2);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_NE(two[0], two[1]);
    EXPECT_EQ(two[0], rendezvousOwners(f, nodes(4), 1)[0]);
  }
  EXPECT_EQ(rendezvousOwners(7, nodes(2), 5).size(), 2u);
}

TEST(Placement, WeightedByCapacity) {
  std::vector<Candidate> v = {{0, 1.0}, {1, 3.0}};
  int big = 0;
  for (uint64_t f = 0; f < 20000; ++f) big += rendezvousOwners(f * 7919, v, 1)[0] == 1;
  EXPECT_NEAR(big, 15000, 600);
}

}  // namespace
}  // namespace epochfs::transport
