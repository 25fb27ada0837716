// Annotated lock types: Mutex (a std::mutex that Clang's -Wthread-safety
// analysis knows as a capability), MutexLock (its scoped lock) and CondVar
// (a std::condition_variable that waits with a Mutex). Members say which
// Mutex guards them (GUARDED_BY, cache/thread_annotations.h), helpers which
// Mutex their caller holds (REQUIRES); `tools/check/thread-safety`, a stage
// of tools/test, compiles the tree with clang and fails on a violation. The
// reader/writer variant is cache/shared_mutex.h. New and touched classes use
// these instead of std::mutex (docs/DESIGN.md "Conventions").
//
//   Mutex mu_;
//   CondVar cv_;
//   std::deque<Job> queue_ GUARDED_BY(mu_);
//   ...
//   MutexLock lock(mu_);
//   cv_.wait(mu_, [&]() REQUIRES(mu_) { return !queue_.empty(); });
//
// A predicate that reads guarded members says REQUIRES(mu): the analysis
// checks a lambda's body on its own, not knowing that CondVar calls it with
// the Mutex held. Holding a Mutex through std::lock_guard/std::unique_lock
// compiles (Mutex is BasicLockable) but the analysis cannot see it: use
// MutexLock.
//
// Each type owns only its std:: primitive; none is copyable or movable.
// Thread-safety: as std::mutex and std::condition_variable; a CondVar may be
// used with one Mutex at a time (all its waiters pass the same one).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "cache/thread_annotations.h"

namespace epochfs::cache {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  // True when the lock was taken.
  bool tryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the calling thread holds the lock where it cannot
  // follow (a callback invoked under the lock). Checks nothing at run time.
  void assertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction. unlock()/lock() let go of
// it and take it back inside the scope (as std::unique_lock's).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Waits for a condition with a Mutex held; every wait releases the Mutex
// while blocked and holds it again when it returns. Timed waits take any
// clock (std::chrono::steady_clock in practice).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until notified (or woken spuriously).
  void wait(Mutex& mu) REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  // Blocks until pred() is true.
  template <class Predicate>
  void wait(Mutex& mu, Predicate pred) REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock, std::move(pred));
  }

  // Blocks until notified or `timeout` passed; false when it passed.
  template <class Rep, class Period>
  bool waitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout) == std::cv_status::no_timeout;
  }
  // Blocks until pred() is true or `timeout` passed; returns pred().
  template <class Rep, class Period, class Predicate>
  bool waitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout, std::move(pred));
  }

  // Blocks until notified or `deadline`; false when the deadline came.
  template <class Clock, class Duration>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline) == std::cv_status::no_timeout;
  }
  // Blocks until pred() is true or `deadline`; returns pred().
  template <class Clock, class Duration, class Predicate>
  bool waitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                 Predicate pred) REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline, std::move(pred));
  }

  // Wakes one waiter / all waiters. The Mutex need not be held.
  void notifyOne() noexcept { cv_.notify_one(); }
  void notifyAll() noexcept { cv_.notify_all(); }

 private:
  // The caller's hold on the Mutex as the std::unique_lock that
  // std::condition_variable waits with; it stays the caller's on every way
  // out (a throwing predicate included): the destructor gives it back
  // without unlocking.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace epochfs::cache
