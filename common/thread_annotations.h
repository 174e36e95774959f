// Clang thread-safety annotations, and a mutex they understand.
//
// `-Wthread-safety` (on in every Apus build, an error with APUS_WERROR) checks at compile time
// that a member marked APUS_GUARDED_BY(mu_) is only touched with mu_ held, that a function
// marked APUS_REQUIRES(mu_) is only called with it held, and so on. The analysis only knows
// types that carry the capability attributes; libstdc++'s std::mutex and std::lock_guard do not,
// so annotated code locks a common::Mutex through a common::MutexLock instead. Both are thin
// wrappers over std::mutex, with no cost beyond it.
//
//   class Cache {
//     void put(Key k, Value v) APUS_EXCLUDES(mu_) { common::MutexLock lock(&mu_); ... }
//     void evict_locked() APUS_REQUIRES(mu_);
//     common::Mutex mu_;
//     std::map<Key, Value> entries_ APUS_GUARDED_BY(mu_);
//     Value* hot_ APUS_PT_GUARDED_BY(mu_);  // the pointer is free, what it points to is not
//   };
//
// Waiting on a condition: common::CondVar, whose waits take the held Mutex.
// Code the analysis cannot follow (locks handed between functions) is marked
// APUS_NO_THREAD_SAFETY_ANALYSIS, with a comment saying why it is safe.
//
// A lock that readers share: common::SharedMutex, held through a ReaderMutexLock (shared) or a
// WriterMutexLock (exclusive).
//
// Other compilers see empty macros. The mutexes, their locks and CondVar are thread-safe, as a
// mutex is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define APUS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define APUS_THREAD_ANNOTATION(x)
#endif

// On a data member: read and written only with `mu` held.
#define APUS_GUARDED_BY(mu) APUS_THREAD_ANNOTATION(guarded_by(mu))
// On a pointer member: what it points to is read and written only with `mu` held.
#define APUS_PT_GUARDED_BY(mu) APUS_THREAD_ANNOTATION(pt_guarded_by(mu))
// On a function: callers must hold the capabilities (exclusively).
#define APUS_REQUIRES(...) APUS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: callers must not hold them (it takes them itself).
#define APUS_EXCLUDES(...) APUS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it takes / releases the capabilities (no arguments: `this`).
#define APUS_ACQUIRE(...) APUS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define APUS_RELEASE(...) APUS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// The same for shared (reader) holds of a SharedMutex, and a release of either kind.
#define APUS_ACQUIRE_SHARED(...) APUS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define APUS_RELEASE_SHARED(...) APUS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define APUS_RELEASE_GENERIC(...) \
  APUS_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
// On a function: callers must hold the capabilities, shared at least.
#define APUS_REQUIRES_SHARED(...) APUS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function returning bool: it takes the capability when it returns `result`.
#define APUS_TRY_ACQUIRE(...) APUS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The same for a shared (reader) hold.
#define APUS_TRY_ACQUIRE_SHARED(...) \
  APUS_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
// On a function: asserts (at run time) that the capability is held; the analysis believes it.
#define APUS_ASSERT_CAPABILITY(x) APUS_THREAD_ANNOTATION(assert_capability(x))
// On a function returning a reference to a mutex: it returns `x`.
#define APUS_RETURN_CAPABILITY(x) APUS_THREAD_ANNOTATION(lock_returned(x))
// On a class: it is a capability (a lock) named `name` in diagnostics.
#define APUS_CAPABILITY(name) APUS_THREAD_ANNOTATION(capability(name))
// On a class: an RAII object that holds a capability for its lifetime.
#define APUS_SCOPED_CAPABILITY APUS_THREAD_ANNOTATION(scoped_lockable)
// On a function: the analysis skips it (say why in a comment).
#define APUS_NO_THREAD_SAFETY_ANALYSIS APUS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace apus::common {

class CondVar;

// std::mutex with the capability attributes. Not recursive.
class APUS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() APUS_ACQUIRE() { mu_.lock(); }
  void unlock() APUS_RELEASE() { mu_.unlock(); }
  bool try_lock() APUS_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds this mutex (no run-time check: std::mutex cannot say).
  void assert_held() const APUS_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for the scope: `common::MutexLock lock(&mu_);`.
class APUS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) APUS_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() APUS_RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable used with a Mutex, which the caller holds across each wait (the
// analysis checks that it does).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu while waiting and holds it again on return. Spurious wake-ups happen: call in a
  // loop, or use wait_until with a predicate.
  void wait(Mutex* mu) APUS_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Waits until pred() or the deadline; returns pred(). pred runs with *mu held; a predicate
  // reading guarded members says so with mu->assert_held() (the analysis cannot see into it).
  template <class Clock, class Duration, class Pred>
  bool wait_until(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline, Pred pred)
      APUS_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool result = cv_.wait_until(lock, deadline, std::move(pred));
    lock.release();
    return result;
  }
  void signal() { cv_.notify_one(); }
  void signal_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// std::shared_mutex with the capability attributes: many readers or one writer. A member
// marked APUS_GUARDED_BY(mu_) may be read under a ReaderMutexLock and written only under a
// WriterMutexLock. Not recursive.
class APUS_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() APUS_ACQUIRE() { mu_.lock(); }
  void unlock() APUS_RELEASE() { mu_.unlock(); }
  void lock_shared() APUS_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() APUS_RELEASE_SHARED() { mu_.unlock_shared(); }
  bool try_lock_shared() APUS_TRY_ACQUIRE_SHARED(true) { return mu_.try_lock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for the scope: `common::WriterMutexLock lock(&mu_);`.
class APUS_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) APUS_ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~WriterMutexLock() APUS_RELEASE() { mu_->unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex shared for the scope: `common::ReaderMutexLock lock(&mu_);`.
class APUS_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) APUS_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_->lock_shared();
  }
  ~ReaderMutexLock() APUS_RELEASE_GENERIC() { mu_->unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace apus::common
