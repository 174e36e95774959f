#include "ring/ring_reloader.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>

#include "common/log/log.h"
#include "ring/ring.h"

namespace apus::ring {

RingReloader::RingReloader(std::chrono::nanoseconds interval)
    : interval_(interval), thread_([this] { run(); }) {}

RingReloader::~RingReloader() {
  {
    common::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.signal_all();
  thread_.join();
}

std::shared_ptr<RingReloader> RingReloader::shared() {
  static std::mutex mutex;
  static std::weak_ptr<RingReloader> current;
  std::lock_guard lock(mutex);
  std::shared_ptr<RingReloader> reloader = current.lock();
  if (!reloader) {
    reloader = std::make_shared<RingReloader>();
    current = reloader;
  }
  return reloader;
}

void RingReloader::add(Ring* ring) {
  common::MutexLock lock(&rings_mutex_);
  rings_.push_back(ring);
}

void RingReloader::remove(Ring* ring) {
  common::MutexLock lock(&rings_mutex_);
  rings_.erase(std::remove(rings_.begin(), rings_.end(), ring), rings_.end());
}

uint64_t RingReloader::passes() const {
  common::MutexLock lock(&mutex_);
  return passes_;
}

void RingReloader::run() {
  // A stray exception would otherwise end the process without a word (house rule for threads
  // of our own).
  try {
    for (;;) {
      {
        common::MutexLock lock(&mutex_);
        const auto deadline = std::chrono::steady_clock::now() + interval_;
        if (wake_.wait_until(&mutex_, deadline, [this] {
              mutex_.assert_held();
              return stopping_;
            })) {
          return;
        }
      }
      check_rings();
      common::MutexLock lock(&mutex_);
      ++passes_;
    }
  } catch (const std::exception& e) {
    APUS_LOG_ERROR(std::string("ring reloader: ") + e.what());
    std::terminate();
  }
}

void RingReloader::check_rings() {
  common::MutexLock lock(&rings_mutex_);
  for (Ring* ring : rings_) {
    // Forced: this thread's interval is the cadence, not the ring's own reload_time.
    common::Result<bool> r = ring->check_reload(/*force=*/true);
    if (!r.ok()) {
      APUS_LOG_WARNING("ring " + ring->path() + ": reload failed, keeping the loaded ring: " +
                       r.status().to_string());
    } else if (*r) {
      APUS_LOG_INFO("ring " + ring->path() + " reloaded");
    }
  }
}

}  // namespace apus::ring
