// SharedMutex: the reader/writer variant of cache/mutex.h, a std::shared_mutex
// that Clang's -Wthread-safety analysis knows as a capability, with its scoped
// locks WriterLock (exclusive) and ReaderLock (shared). A member GUARDED_BY a
// SharedMutex may be read under either lock and written only under a
// WriterLock; a helper that only reads says REQUIRES_SHARED(mu).
//
//   mutable SharedMutex mu_;
//   std::map<Key, Peer> peers_ GUARDED_BY(mu_);
//   ...
//   ReaderLock lock(mu_);   // lookups
//   WriterLock lock(mu_);   // updates
//
// Each type owns only its std::shared_mutex (or a reference to it); none is
// copyable. Thread-safety: as std::shared_mutex (not recursive; a reader
// that takes the lock again may deadlock behind a waiting writer).
#pragma once

#include <shared_mutex>

#include "cache/thread_annotations.h"

namespace epochfs::cache {

class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool tryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void lockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }
  bool tryLockShared() TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }
  // For the analysis only, as Mutex::assertHeld(): nothing is checked.
  void assertHeld() const ASSERT_CAPABILITY(this) {}
  void assertReaderHeld() const ASSERT_SHARED_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its lifetime.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its lifetime.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lockShared(); }
  ~ReaderLock() RELEASE() { mu_.unlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace epochfs::cache
