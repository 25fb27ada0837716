// CandidateRing: up to 16 members every member is a candidate, ranked as
// weighted rendezvous (rendezvousOwners); past that a few distinct members
// from the ring, at least as many as asked, the same whatever the members'
// order, and a member leaving only drops out of candidate sets.
#include "transport/candidate_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace epochfs::transport {
namespace {

std::vector<Candidate> members(uint32_t n) {
  std::vector<Candidate> live;
  for (uint32_t i = 0; i < n; ++i) live.push_back({i * 5 + 1, 1.0 + (i % 3)});
  return live;
}

std::set<uint32_t> ids(const std::vector<CandidateRing::Scored>& c,
                       const std::vector<Candidate>& live) {
  std::set<uint32_t> out;
  for (const auto& s : c) out.insert(live[s.member].nodeId);
  return out;
}

// Pass: 16 members: all of them, in rendezvousOwners' order.
TEST(CandidateRing, SmallClusterIsRendezvous) {
  const auto live = members(16);
  const CandidateRing ring(live);
  std::vector<CandidateRing::Scored> c;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t file = rng();
    ring.candidates(file, 2, c);
    ASSERT_EQ(c.size(), 16u);
    const auto order = rendezvousOwners(file, live, 16);
    for (size_t j = 0; j < 16; ++j) ASSERT_EQ(live[c[j].member].nodeId, order[j]);
  }
}

// Pass: 1,024 members: a handful of distinct candidates (at least the
// number asked), best first, the same when the members come in another order.
TEST(CandidateRing, LargeClusterGivesAFewDistinctCandidates) {
  auto live = members(1024);
  const CandidateRing ring(live);
  auto shuffled = live;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(2));
  const CandidateRing other(shuffled);
  std::vector<CandidateRing::Scored> c, d;
  std::mt19937_64 rng(3);
  size_t total = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t file = rng();
    ring.candidates(file, 3, c);
    ASSERT_GE(c.size(), 3u);
    ASSERT_EQ(ids(c, live).size(), c.size()) << "candidates are distinct";
    for (size_t j = 1; j < c.size(); ++j) ASSERT_GE(c[j - 1].score, c[j].score);
    other.candidates(file, 3, d);
    ASSERT_EQ(c.size(), d.size());
    for (size_t j = 0; j < c.size(); ++j)
      ASSERT_EQ(live[c[j].member].nodeId, shuffled[d[j].member].nodeId);
    total += c.size();
  }
  const double mean = static_cast<double>(total) / 20000;
  EXPECT_GT(mean, 4.0);
  EXPECT_LT(mean, 12.0);
}

// Pass: after a member leaves, a file's candidates are its candidates
// before without that member (a window extended past its width, when it
// held too few, is the only exception: rare).
TEST(CandidateRing, LeavingMemberOnlyDropsOut) {
  auto live = members(600);
  const CandidateRing before(live);
  const uint32_t gone = live[42].nodeId;
  live.erase(live.begin() + 42);
  const CandidateRing after(live);
  auto all = members(600);
  std::vector<CandidateRing::Scored> c;
  std::mt19937_64 rng(4);
  int differ = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t file = rng();
    before.candidates(file, 2, c);
    auto was = ids(c, all);
    was.erase(gone);
    after.candidates(file, 2, c);
    differ += ids(c, live) != was;
  }
  EXPECT_LT(differ, 20000 / 100);
}

// Pass: closeness is 1 for a tie and below 1 for a lower claim.
TEST(CandidateRing, ClosenessIsAScoreRatio) {
  const CandidateRing small(members(4)), large(members(64));
  EXPECT_DOUBLE_EQ(small.closeness(2.0, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(small.closeness(2.0, 1.0), 0.5);
  std::vector<CandidateRing::Scored> c;
  large.candidates(99, 2, c);
  EXPECT_DOUBLE_EQ(large.closeness(c[0].score, c[0].score), 1.0);
  EXPECT_LT(large.closeness(c[0].score, c[1].score), 1.0);
  EXPECT_GT(large.closeness(c[0].score, c[1].score), 0.0);
}

}  // namespace
}  // namespace epochfs::transport
