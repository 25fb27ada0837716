// OpQueue: ops from many threads all reach the consumer, and a consumer that
// sleeps in epoll on the eventfd is always woken for them (no lost wake-up).
#include "transport/op_queue.h"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <thread>

namespace epochfs::transport {
namespace {

TEST(OpQueue, EveryPostReachesASleepingConsumer) {
  OpQueue q;
  ASSERT_TRUE(q.status().isOk());
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = q.fd();
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, q.fd(), &ev), 0);
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&q, t] {
      for (int i = 0; i < kEach; ++i) {
        ClusterOp op;
        op.connId = static_cast<uint64_t>(t) * kEach + i + 1;
        q.post(std::move(op));
        if (i % 512 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  int seen = 0, sleeps = 0;
  while (seen < kThreads * kEach) {
    seen += static_cast<int>(q.take().size());
    if (seen == kThreads * kEach || !q.trySleep()) continue;
    ++sleeps;
    epoll_event out{};
    // A lost wake-up would hang here: 10 s fails the test instead.
    const int n = epoll_wait(ep, &out, 1, 10000);
    ASSERT_EQ(n, 1) << "the consumer slept through posted ops (" << seen << " seen)";
    q.awake(true);
  }
  for (auto& t : posters) t.join();
  EXPECT_EQ(seen, kThreads * kEach);
  EXPECT_TRUE(q.take().empty());
  EXPECT_GT(sleeps, 0) << "the consumer slept at least once between bursts";
  close(ep);
}

TEST(OpQueue, TrySleepRefusesWhileOpsAreQueued) {
  OpQueue q;
  q.post(ClusterOp{});
  EXPECT_FALSE(q.trySleep());
  EXPECT_EQ(q.take().size(), 1u);
  EXPECT_TRUE(q.trySleep());
  q.awake(false);
}

}  // namespace
}  // namespace epochfs::transport
