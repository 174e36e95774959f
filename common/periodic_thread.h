// PeriodicThread: runs a pass every `interval` seconds on a thread of its own, the way the
// servers' background sweeps run (the container updater, container sync, the listing stores'
// reclaim). Between passes the thread sleeps on a condition variable, which costs nothing;
// stop() wakes it and joins it (a pass under way finishes first: the pass's owner makes it
// end early, e.g. with a cancelled flag set before stop()).
//
// The first pass starts after a random part of one interval when `spread_start` is set, as
// Swift's daemons spread themselves, else after one whole interval. Each next pass starts one
// interval after the previous one started (or at once when a pass took longer).
//
// Thread-safe: start() and stop() from the controlling thread.
#pragma once

#include <functional>
#include <thread>

#include "common/thread_annotations.h"

namespace apus::common {

class PeriodicThread {
 public:
  PeriodicThread(double interval_seconds, bool spread_start, std::function<void()> pass);
  ~PeriodicThread();  // stops
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void start();  // no-op when running
  void stop();   // no-op when stopped
  // The next pass starts now (or right after the one under way) instead of at its time; the
  // one after it one interval later. Any thread.
  void run_now();

 private:
  const double interval_;
  const bool spread_start_;
  const std::function<void()> pass_;
  std::thread thread_;
  Mutex mutex_;
  CondVar wake_;  // signalled by stop() and run_now()
  bool stopping_ APUS_GUARDED_BY(mutex_) = false;
  bool run_now_ APUS_GUARDED_BY(mutex_) = false;
};

}  // namespace apus::common
