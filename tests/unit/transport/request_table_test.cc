// RequestTable: request ids, per-peer counts, deadlines, and that completing
// a request wakes its caller exactly once (no UCX).
#include "transport/request_table.h"

#include <gtest/gtest.h>

#include <thread>

namespace epochfs::transport {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<PendingFetch> request(uint32_t peer, Clock::time_point deadline) {
  auto p = std::make_shared<PendingFetch>();
  p->peer = peer;
  p->deadline = deadline;
  return p;
}

TEST(RequestTable, IdsCountsAndCompletion) {
  RequestTable t(3, 2);
  const auto later = Clock::now() + std::chrono::seconds(10);
  auto a = request(1, later), b = request(1, later), c = request(2, later);
  const uint64_t ida = t.add(a);
  EXPECT_FALSE(t.full(1));
  const uint64_t idb = t.add(b);
  t.add(c);
  EXPECT_NE(ida, idb);
  EXPECT_TRUE(t.full(1)) << "two in flight is peer 1's limit";
  EXPECT_EQ(t.inFlight(2), 1u);
  EXPECT_EQ(t.find(ida), a);
  t.complete(a, cache::Status::ok());
  EXPECT_EQ(t.find(ida), nullptr);
  EXPECT_EQ(t.inFlight(1), 1u);
  EXPECT_TRUE(a->waitUntil(Clock::now()));
  EXPECT_TRUE(a->status.isOk());
  // A second completion changes nothing (a late reply after a timeout).
  t.complete(a, cache::Status::timedOut("late"));
  EXPECT_TRUE(a->status.isOk());
  EXPECT_EQ(t.inFlight(1), 1u);
  EXPECT_EQ(t.size(), 2u);
}

TEST(RequestTable, ExpiredAndNextDeadline) {
  RequestTable t(2, 64);
  const auto now = Clock::now();
  auto soon = request(1, now + std::chrono::milliseconds(100));
  auto late = request(1, now + std::chrono::seconds(5));
  t.add(soon);
  t.add(late);
  EXPECT_EQ(t.nextDeadline(now + std::chrono::seconds(1)), soon->deadline);
  EXPECT_EQ(t.nextDeadline(now), now) << "no later than the bound";
  EXPECT_TRUE(t.expired(now).empty());
  auto gone = t.expired(now + std::chrono::milliseconds(100));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], soon);
}

TEST(RequestTable, FailPeerEndsOnlyItsRequests) {
  RequestTable t(3, 64);
  const auto later = Clock::now() + std::chrono::seconds(10);
  auto a = request(1, later), b = request(1, later), c = request(2, later);
  t.add(a);
  t.add(b);
  t.add(c);
  t.failPeer(1, cache::Status::unavailable("peer 1 lost"));
  EXPECT_EQ(t.inFlight(1), 0u);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(a->status.code(), cache::Status::Code::kUnavailable);
  EXPECT_EQ(b->status.code(), cache::Status::Code::kUnavailable);
  EXPECT_FALSE(c->waitUntil(Clock::now() + std::chrono::milliseconds(10)));
  t.failAll(cache::Status::unavailable("stopping"));
  EXPECT_TRUE(c->waitUntil(Clock::now()));
  EXPECT_EQ(t.size(), 0u);
}

TEST(RequestTable, CompletionWakesTheWaitingCaller) {
  RequestTable t(2, 64);
  auto p = request(1, Clock::now() + std::chrono::seconds(10));
  t.add(p);
  std::thread caller([&] {
    EXPECT_TRUE(p->waitUntil(Clock::now() + std::chrono::seconds(30)));
    EXPECT_EQ(p->status.code(), cache::Status::Code::kNotFound);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.complete(p, cache::Status::notFound("refused"));
  caller.join();
}

}  // namespace
}  // namespace epochfs::transport
