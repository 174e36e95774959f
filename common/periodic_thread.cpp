#include "common/periodic_thread.h"

#include <chrono>
#include <random>
#include <utility>

namespace apus::common {

namespace {
using Clock = std::chrono::steady_clock;
Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

PeriodicThread::PeriodicThread(double interval_seconds, bool spread_start,
                               std::function<void()> pass)
    : interval_(interval_seconds), spread_start_(spread_start), pass_(std::move(pass)) {}

PeriodicThread::~PeriodicThread() { stop(); }

void PeriodicThread::start() {
  if (thread_.joinable()) return;
  {
    MutexLock lock(&mutex_);
    stopping_ = false;
    run_now_ = false;
  }
  thread_ = std::thread([this] {
    double first = interval_;
    if (spread_start_) {
      std::mt19937_64 rng(std::random_device{}());
      first = std::uniform_real_distribution<double>(0, interval_)(rng);
    }
    auto next = Clock::now() + seconds(first);
    for (;;) {
      {
        MutexLock lock(&mutex_);
        auto woken = [this] {
          mutex_.assert_held();  // wait_until runs the predicate with mutex_ held
          return stopping_ || run_now_;
        };
        wake_.wait_until(&mutex_, next, woken);
        if (stopping_) return;
        run_now_ = false;
      }
      auto began = Clock::now();
      pass_();
      next = began + seconds(interval_);
    }
  });
}

void PeriodicThread::run_now() {
  {
    MutexLock lock(&mutex_);
    run_now_ = true;
  }
  wake_.signal_all();
}

void PeriodicThread::stop() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.signal_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace apus::common
