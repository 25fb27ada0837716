// Thread-safety annotations: the attributes of Clang's -Wthread-safety
// analysis, as macros that state in the types which lock guards which data
// (docs/DESIGN.md "Conventions"). Under Clang they expand to the attributes
// and `tools/check/thread-safety` (run by tools/test) checks every use; under
// any other compiler (the build's g++) they expand to nothing. Modelled on
// LevelDB's port/thread_annotations.h and Clang's ThreadSafetyAnalysis docs.
//
// Use them with the annotated lock types of cache/mutex.h:
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_);            // read/written only with mu_ held
//   void bumpLocked() REQUIRES(mu_);        // the caller holds mu_
//   void bump() EXCLUDES(mu_);              // takes mu_ itself
// Nothing here owns state; the header is a set of macros only.
#pragma once

#if defined(__clang__)
#define EPOCHFS_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define EPOCHFS_THREAD_ANNOTATION_(x)  // no-op: g++ has no such analysis
#endif

// --- on types ---------------------------------------------------------------

// The class is a lock ("capability"); `kind` names it in diagnostics.
#ifndef CAPABILITY
#define CAPABILITY(kind) EPOCHFS_THREAD_ANNOTATION_(capability(kind))
#endif

// The class is an RAII object that holds a capability for its lifetime.
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY EPOCHFS_THREAD_ANNOTATION_(scoped_lockable)
#endif

// --- on data members ----------------------------------------------------------

// The member is read and written only with the capability held (reads
// may hold it shared).
#ifndef GUARDED_BY
#define GUARDED_BY(x) EPOCHFS_THREAD_ANNOTATION_(guarded_by(x))
#endif

// What the (smart) pointer member points to is guarded by the capability;
// the pointer itself is not.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) EPOCHFS_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif

// Lock order: this capability is taken after / before the listed ones.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) EPOCHFS_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) EPOCHFS_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif

// --- on functions -------------------------------------------------------------

// The caller must hold the capabilities (exclusively / at least shared).
#ifndef REQUIRES
#define REQUIRES(...) EPOCHFS_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) EPOCHFS_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif

// The function takes the capabilities and returns holding them. Without an
// argument on a member function: the object itself (a lock's lock()).
#ifndef ACQUIRE
#define ACQUIRE(...) EPOCHFS_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) EPOCHFS_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#endif

// The function releases capabilities the caller held (exclusive, shared, or
// either).
#ifndef RELEASE
#define RELEASE(...) EPOCHFS_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) EPOCHFS_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_GENERIC
#define RELEASE_GENERIC(...) EPOCHFS_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
#endif

// The function tries to take the capability; the first argument is the
// return value that means success (true for a bool).
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) EPOCHFS_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE_SHARED
#define TRY_ACQUIRE_SHARED(...) \
  EPOCHFS_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
#endif

// The caller must not hold the capabilities (the function takes them): catches
// self-deadlock on a non-recursive mutex.
#ifndef EXCLUDES
#define EXCLUDES(...) EPOCHFS_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif

// The function checks at run time that the capability is held (and aborts
// otherwise); after the call the analysis takes it as held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) EPOCHFS_THREAD_ANNOTATION_(assert_capability(x))
#endif
#ifndef ASSERT_SHARED_CAPABILITY
#define ASSERT_SHARED_CAPABILITY(x) EPOCHFS_THREAD_ANNOTATION_(assert_shared_capability(x))
#endif

// The function returns a reference to the capability (an accessor).
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) EPOCHFS_THREAD_ANNOTATION_(lock_returned(x))
#endif

// The analysis skips this function's body. Last resort, with a comment
// saying why the locking is right anyway.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS EPOCHFS_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif
