// BlockingPool: threads that run blocking work (open, fsync, rename, xattrs, RocksDB calls) so
// that network workers never block.
//
// Jobs go through a lock-free queue (moodycamel BlockingConcurrentQueue) to `threads` threads.
// A coroutine on a network worker awaits a job with `co_await pool.call(fn)`: fn runs on a pool
// thread and the coroutine resumes on its own executor with fn's result. Servers keep one pool
// per device (architecture.md), so a slow disk only slows the requests for that disk.
//
// Jobs must not throw: an exception escaping a job is a broken invariant, logged, then fatal.
// Ownership: anything a job touches must outlive the job; capture shared_ptrs when in doubt.
//
// Thread-safe. The destructor drains the queue (runs every queued job) and joins the threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <boost/asio/awaitable.hpp>

namespace apus::common {
class Metrics;
}

namespace apus::common::io {

class BlockingPool {
 public:
  using Job = std::function<void()>;

  BlockingPool(std::string name, int threads);
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Queues `job` to run on a pool thread. Never blocks.
  void submit(Job job);

  // Runs `job` on a pool thread; the awaiting coroutine resumes on its executor afterwards.
  // (Plain functions wrap the coroutines below: see the GCC 12 note in common/http/server.h.)
  boost::asio::awaitable<void> run(Job job) { return run_job(std::move(job)); }

  // Runs `fn` on a pool thread and returns its result to the awaiting coroutine.
  template <class F, class R = std::invoke_result_t<F&>>
  boost::asio::awaitable<R> call(F fn) {
    return call_job<F, R>(std::move(fn));
  }

  // Jobs queued but not yet started (approximate).
  size_t queue_depth() const;
  // Jobs running now.
  size_t busy() const { return busy_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

  // Samples queue depth and busy threads into `metrics` at every scrape, labelled pool=name().
  // This pool must outlive `metrics`' last scrape.
  void export_metrics(Metrics& metrics) const;

 private:
  struct Queue;
  void worker_loop();
  boost::asio::awaitable<void> run_job(Job job);

  template <class F, class R>
  boost::asio::awaitable<R> call_job(F fn) {
    // Named, then moved: never a prvalue argument to a coroutine (GCC 12).
    if constexpr (std::is_void_v<R>) {
      Job job(std::move(fn));
      co_await run_job(std::move(job));
    } else {
      std::optional<R> result;
      Job job([&result, &fn] { result.emplace(fn()); });
      co_await run_job(std::move(job));
      co_return std::move(*result);
    }
  }

  std::string name_;
  std::unique_ptr<Queue> queue_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> busy_{0};
};

}  // namespace apus::common::io
