// Compile-time test (tests/CMakeLists.txt, ctest thread_safety_clean_compiles):
// the twin of guarded_without_lock.cc that holds the Mutex for every use of
// the guarded members, through a MutexLock, a REQUIRES helper and a CondVar
// predicate. clang++-14 -fsyntax-only -Wthread-safety -Werror=thread-safety
// must accept it. Not linked into any test binary.
#include "cache/mutex.h"

namespace epochfs::cache {

class Counter {
 public:
  void add(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    addLocked(n);
    cv_.notifyAll();
  }

  int waitForAtLeast(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.wait(mu_, [&]() REQUIRES(mu_) { return count_ >= n; });
    return count_;
  }

 private:
  void addLocked(int n) REQUIRES(mu_) { count_ += n; }

  Mutex mu_;
  CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
};

int useCounter() {
  Counter c;
  c.add(2);
  return c.waitForAtLeast(1);
}

}  // namespace epochfs::cache
