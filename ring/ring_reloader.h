// RingReloader: keeps rings current from a thread of its own, so that no lookup ever reloads.
//
// Swift's Ring checks its file inside lookups (reload_on_lookup). In Apus lookups run on network
// threads, where a stat and, after a rebalance, a gunzip and parse of the whole ring (tens of
// milliseconds for a large ring) would stall every connection of that thread. A Ring opened with
// RingOptions::reloader set registers with the reloader instead, and its lookups never touch the
// file: they take the state the reloader last published (ring.h explains the lock-free swap).
//
// Cadence and cost: the reloader's thread wakes every `interval` (default 15 s, Swift's
// reload_time) and checks each registered ring: one stat per ring per interval, and a read and
// parse only when the file's mtime or size changed. A failed check (file missing or corrupt)
// keeps the loaded ring, logs a warning and is retried at the next interval. A new ring file
// is therefore in use at most `interval` (plus the parse) after it lands.
//
// Ownership: rings register themselves at open and unregister in their destructor, so a ring may
// die before or after its reloader (each ring holds a shared_ptr to it). shared() hands out one
// process-wide reloader that lives as long as some ring uses it: its thread is joined when the
// last such ring goes.
//
// Thread-safe. remove() waits for a check of that ring in progress, so once it returns the
// reloader no longer touches the ring.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/thread_annotations.h"

namespace apus::ring {

class Ring;

class RingReloader {
 public:
  // Swift's reload_time.
  static constexpr std::chrono::nanoseconds kDefaultInterval = std::chrono::seconds(15);

  // Starts the thread; it checks every registered ring every `interval`.
  explicit RingReloader(std::chrono::nanoseconds interval = kDefaultInterval);
  // Stops and joins the thread. Rings still registered are simply no longer checked.
  ~RingReloader();
  RingReloader(const RingReloader&) = delete;
  RingReloader& operator=(const RingReloader&) = delete;

  // The process-wide reloader with the default interval, created on first use and destroyed
  // (its thread joined) when the last holder lets go.
  static std::shared_ptr<RingReloader> shared();

  // Registers `ring` (Ring::open does this when RingOptions::reloader is set). `ring` must call
  // remove() before it dies.
  void add(Ring* ring) APUS_EXCLUDES(rings_mutex_);
  // Unregisters `ring`, waiting for a check of it in progress.
  void remove(Ring* ring) APUS_EXCLUDES(rings_mutex_);

  // Completed passes over the registered rings (tests wait on it).
  uint64_t passes() const APUS_EXCLUDES(mutex_);
  std::chrono::nanoseconds interval() const { return interval_; }

 private:
  void run() APUS_EXCLUDES(mutex_, rings_mutex_);
  // One pass: checks every registered ring.
  void check_rings() APUS_EXCLUDES(rings_mutex_);

  const std::chrono::nanoseconds interval_;
  // Held while a pass checks the rings, so remove() cannot return during a check of its ring.
  common::Mutex rings_mutex_;
  std::vector<Ring*> rings_ APUS_GUARDED_BY(rings_mutex_);
  mutable common::Mutex mutex_;
  common::CondVar wake_;
  bool stopping_ APUS_GUARDED_BY(mutex_) = false;
  uint64_t passes_ APUS_GUARDED_BY(mutex_) = 0;
  std::thread thread_;     // last: started once the members above exist
};

}  // namespace apus::ring
