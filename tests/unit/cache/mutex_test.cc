// The annotated lock types (cache/mutex.h, cache/shared_mutex.h) at run
// time: MutexLock excludes other threads and lets go/takes back inside its
// scope; tryLock fails while held; CondVar waits until notified, returns on
// a predicate, times out with or without one; a reader lock admits other
// readers but no writer. (What the analysis checks is tested at compile time
// by tests/unit/locks/.)
#include "cache/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cache/shared_mutex.h"

namespace epochfs::cache {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// What the threads of one test share, each member guarded as it says.
struct Shared {
  Mutex mu;
  CondVar cv;
  long count GUARDED_BY(mu) = 0;
  bool flag GUARDED_BY(mu) = false;
  int value GUARDED_BY(mu) = 0;
};

// True when `mu` was free: takes it and lets it go again.
bool tryTakeAndRelease(Mutex& mu) {
  if (!mu.tryLock()) return false;
  mu.unlock();
  return true;
}

// Pass: four threads adding 10,000 times each under MutexLock lose no update.
TEST(Mutex, MutexLockExcludesOtherThreads) {
  Shared s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(s.mu);
        ++s.count;
      }
    });
  }
  for (auto& t : threads) t.join();
  MutexLock lock(s.mu);
  EXPECT_EQ(s.count, 40000);
}

// Pass: tryLock fails while another thread holds the Mutex (also through a
// MutexLock taken back after unlock()), succeeds once it is free.
TEST(Mutex, TryLockFailsWhileHeld) {
  Mutex mu;
  bool took = true;
  MutexLock lock(mu);
  std::thread([&] { took = tryTakeAndRelease(mu); }).join();
  EXPECT_FALSE(took);

  lock.unlock();
  std::thread([&] { took = tryTakeAndRelease(mu); }).join();
  EXPECT_TRUE(took);

  lock.lock();
  std::thread([&] { took = tryTakeAndRelease(mu); }).join();
  EXPECT_FALSE(took);
}

// Pass: a waiter blocked on a predicate returns once another thread sets
// the flag under the Mutex and notifies, and sees the value set with it.
TEST(CondVar, WaitReturnsWhenNotifiedAndThePredicateHolds) {
  Shared s;
  std::thread producer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    {
      MutexLock lock(s.mu);
      s.value = 42;
      s.flag = true;
    }
    s.cv.notifyOne();
  });
  {
    MutexLock lock(s.mu);
    s.cv.wait(s.mu, [&]() REQUIRES(s.mu) { return s.flag; });
    EXPECT_EQ(s.value, 42);
  }
  producer.join();
}

// Pass: waitFor/waitUntil with a predicate that stays false return false
// after (not before) their timeout; with one that is already true they
// return true at once; without a predicate they return (true when woken,
// false on the timeout).
TEST(CondVar, TimedWaitsReportTheTimeout) {
  Shared s;
  MutexLock lock(s.mu);

  auto start = steady_clock::now();
  EXPECT_FALSE(s.cv.waitFor(s.mu, milliseconds(30), [&]() REQUIRES(s.mu) { return s.flag; }));
  EXPECT_GE(steady_clock::now() - start, milliseconds(30));

  start = steady_clock::now();
  EXPECT_FALSE(
      s.cv.waitUntil(s.mu, start + milliseconds(30), [&]() REQUIRES(s.mu) { return s.flag; }));
  EXPECT_GE(steady_clock::now() - start, milliseconds(30));

  start = steady_clock::now();
  EXPECT_TRUE(
      s.cv.waitFor(s.mu, std::chrono::seconds(10), [&]() REQUIRES(s.mu) { return !s.flag; }));
  EXPECT_TRUE(s.cv.waitUntil(s.mu, steady_clock::now() + std::chrono::seconds(10),
                             [&]() REQUIRES(s.mu) { return !s.flag; }));
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));

  // Nobody notifies: each returns after its timeout or on a spurious wake-up.
  start = steady_clock::now();
  (void)s.cv.waitFor(s.mu, milliseconds(5));
  (void)s.cv.waitUntil(s.mu, steady_clock::now() + milliseconds(5));
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));
}

// Pass: the Mutex is free while waiters block (each of them takes it in
// turn), and one notifyAll wakes all three.
TEST(CondVar, WaitReleasesTheMutexAndNotifyAllWakesEveryWaiter) {
  Shared s;  // count: threads waiting; value: threads woken
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      MutexLock lock(s.mu);
      ++s.count;
      s.cv.notifyAll();  // the main thread waits for all three
      s.cv.wait(s.mu, [&]() REQUIRES(s.mu) { return s.flag; });
      ++s.value;
    });
  }
  {
    MutexLock lock(s.mu);
    ASSERT_TRUE(s.cv.waitFor(s.mu, std::chrono::seconds(10),
                             [&]() REQUIRES(s.mu) { return s.count == 3; }));
    s.flag = true;
  }
  s.cv.notifyAll();
  for (auto& t : waiters) t.join();
  MutexLock lock(s.mu);
  EXPECT_EQ(s.value, 3);
}

struct SharedReadMostly {
  SharedMutex mu;
  int value GUARDED_BY(mu) = 5;
};

// Pass: while one thread holds a ReaderLock another may take one too, but a
// writer's tryLock fails until the reader is gone.
TEST(SharedMutex, ReadersShareWritersExclude) {
  SharedReadMostly s;
  {
    ReaderLock reader(s.mu);
    bool otherReader = false;
    bool writer = true;
    std::thread([&] {
      if (s.mu.tryLockShared()) {
        otherReader = true;
        s.mu.unlockShared();
      }
      if (s.mu.tryLock()) {
        writer = true;
        s.mu.unlock();
      } else {
        writer = false;
      }
    }).join();
    EXPECT_TRUE(otherReader);
    EXPECT_FALSE(writer);
    EXPECT_EQ(s.value, 5);
  }
  {
    WriterLock writer(s.mu);
    s.value = 6;
  }
  ReaderLock reader(s.mu);
  EXPECT_EQ(s.value, 6);
}

}  // namespace
}  // namespace epochfs::cache
