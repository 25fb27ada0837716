// Revocable<T> and Lease on their own: a lent object is seen by uses until
// its lease ends; ending waits for a use in progress; lending again ends the
// previous lease; a lease may outlive its borrower; and under concurrent uses
// no use ever sees an object whose lease has ended.
#include "cache/revocable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cache/lease.h"
#include "tests/unit/cache/call_gate.h"

namespace epochfs::cache {
namespace {

struct Thing {
  int value = 0;
  std::atomic<bool> alive{true};
};

// Pass: nothing before lend(); the object while the lease lives; nothing
// after end(); end() twice is harmless.
TEST(Revocable, UsesSeeTheObjectWhileTheLeaseLives) {
  Revocable<const Thing> slot;
  EXPECT_FALSE(slot.use());
  EXPECT_FALSE(slot.lent());
  Thing thing;
  thing.value = 7;
  Lease lease = slot.lend(thing);
  EXPECT_TRUE(lease.active());
  EXPECT_TRUE(slot.lent());
  {
    const auto use = slot.use();
    ASSERT_TRUE(use);
    EXPECT_EQ(use->value, 7);
  }
  lease.end();
  EXPECT_FALSE(lease.active());
  EXPECT_FALSE(slot.use());
  EXPECT_FALSE(slot.lent());
  lease.end();
}

// Pass: end() returns only after a use in progress ended.
TEST(Revocable, EndingTheLeaseWaitsForAUseInProgress) {
  Revocable<Thing> slot;
  Thing thing;
  Lease lease = slot.lend(thing);
  testing::CallGate gate;
  gate.arm();
  std::thread user([&] {
    const auto use = slot.use();
    EXPECT_TRUE(use);
    gate.pass();  // held here, inside the use
  });
  EXPECT_TRUE(testing::waitsForHeldCall(gate, [&] { lease.end(); }));
  user.join();
  EXPECT_FALSE(slot.use());
}

// Pass: lending another object ends the first lease (uses see the second);
// the first lease's end() afterwards leaves the second lent.
TEST(Revocable, LendingAgainEndsThePreviousLease) {
  Revocable<const Thing> slot;
  Thing a, b;
  a.value = 1;
  b.value = 2;
  Lease first = slot.lend(a);
  Lease second = slot.lend(b);
  EXPECT_EQ(slot.use()->value, 2);
  first.end();
  ASSERT_TRUE(slot.use());
  EXPECT_EQ(slot.use()->value, 2);
  second.end();
  EXPECT_FALSE(slot.use());
}

// Pass: move-assigning a lease ends the one it replaces.
TEST(Revocable, AssigningALeaseEndsTheOneItReplaces) {
  Revocable<const Thing> slotA, slotB;
  Thing a, b;
  Lease lease = slotA.lend(a);
  lease = slotB.lend(b);
  EXPECT_FALSE(slotA.use());
  EXPECT_TRUE(slotB.use());
}

// Pass: a lease that outlives its borrower ends without touching it (ASan).
TEST(Revocable, ALeaseMayOutliveTheBorrower) {
  Thing thing;
  Lease lease;
  {
    Revocable<const Thing> slot;
    lease = slot.lend(thing);
  }
  lease.end();
  EXPECT_FALSE(lease.active());
}

// Pass: 4 threads use the slot while the main thread lends 200 objects in
// turn, marking each dead right after its lease ended: no use sees a dead
// object, and uses saw objects at all.
TEST(Revocable, NoUseSeesAnObjectAfterItsLeaseEnded) {
  Revocable<const Thing> slot;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> seen{0}, dead{0};
  std::vector<std::thread> users;
  for (int t = 0; t < 4; ++t) {
    users.emplace_back([&] {
      while (!stop.load()) {
        const auto use = slot.use();
        if (!use) continue;
        seen.fetch_add(1);
        if (!use->alive.load()) dead.fetch_add(1);
      }
    });
  }
  std::vector<Thing> things(200);
  for (Thing& t : things) {
    Lease lease = slot.lend(t);
    while (seen.load() == 0) std::this_thread::yield();  // someone used the first
    lease.end();
    t.alive.store(false);
  }
  stop.store(true);
  for (auto& u : users) u.join();
  EXPECT_GT(seen.load(), 0u);
  EXPECT_EQ(dead.load(), 0u);
}

}  // namespace
}  // namespace epochfs::cache
