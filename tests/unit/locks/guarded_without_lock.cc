// Compile-time test (tests/CMakeLists.txt, ctest thread_safety_violation_caught):
// reads and writes a GUARDED_BY member without holding its Mutex. clang++-14
// -fsyntax-only -Wthread-safety -Werror=thread-safety must reject it with the
// analysis' diagnostic ("... requires holding mutex 'mu_' ..."), not any other
// error. The twin that holds the lock is guarded_with_lock.cc. Not linked
// into any test binary.
#include "cache/mutex.h"

namespace epochfs::cache {

class Counter {
 public:
  void add(int n) EXCLUDES(mu_) {
    count_ += n;  // error: writing count_ requires holding mu_
    cv_.notifyAll();
  }

  int waitForAtLeast(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.wait(mu_, [&]() REQUIRES(mu_) { return count_ >= n; });
    return count_;
  }

  int peek() const { return count_; }  // error: reading count_ requires holding mu_

 private:
  Mutex mu_;
  CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
};

int useCounter() {
  Counter c;
  c.add(2);
  return c.waitForAtLeast(1) + c.peek();
}

}  // namespace epochfs::cache
