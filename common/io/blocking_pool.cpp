#include "common/io/blocking_pool.h"

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>

#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/status.h"

namespace apus::common::io {

namespace net = boost::asio;

struct BlockingPool::Queue {
  // An empty Job is the stop signal: one per thread, queued by the destructor after all work.
  moodycamel::BlockingConcurrentQueue<Job> jobs;
};

BlockingPool::BlockingPool(std::string name, int threads)
    : name_(std::move(name)), queue_(std::make_unique<Queue>()) {
  APUS_CHECK(threads > 0);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { worker_loop(); });
}

BlockingPool::~BlockingPool() {
  for (size_t i = 0; i < threads_.size(); ++i) queue_->jobs.enqueue(Job());
  for (auto& t : threads_) t.join();
}

void BlockingPool::submit(Job job) {
  APUS_CHECK(job != nullptr);
  queue_->jobs.enqueue(std::move(job));
}

size_t BlockingPool::queue_depth() const { return queue_->jobs.size_approx(); }

void BlockingPool::export_metrics(Metrics& metrics) const {
  auto depth = metrics.gauge("apus_pool_queue_depth", "Jobs waiting for a pool thread",
                             {{"pool", name_}});
  auto busy = metrics.gauge("apus_pool_busy_threads", "Pool threads running a job",
                            {{"pool", name_}});
  metrics.add_collect_hook([this, depth, busy] {
    depth.set(static_cast<double>(queue_depth()));
    busy.set(static_cast<double>(this->busy()));
  });
}

void BlockingPool::worker_loop() {
  moodycamel::ConsumerToken token(queue_->jobs);
  for (;;) {
    Job job;
    queue_->jobs.wait_dequeue(token, job);
    if (!job) return;
    busy_.fetch_add(1, std::memory_order_relaxed);
    try {
      job();
    } catch (const std::exception& e) {
      APUS_LOG_ERROR("pool " + name_ + ": job threw: " + e.what());
      std::abort();
    } catch (...) {
      APUS_LOG_ERROR("pool " + name_ + ": job threw a non-exception");
      std::abort();
    }
    busy_.fetch_sub(1, std::memory_order_relaxed);
  }
}

net::awaitable<void> BlockingPool::run_job(Job job) {
  auto initiate = [this, &job](auto handler) {
    using Handler = decltype(handler);
    auto ex = net::get_associated_executor(handler);
    // The work guard keeps the awaiting io_context running while the job is away; the
    // std::function needs a copyable target, so the move-only handler travels in a shared_ptr.
    struct Pending {
      Handler handler;
      net::executor_work_guard<decltype(ex)> work;
    };
    auto pending = std::make_shared<Pending>(Pending{std::move(handler), net::make_work_guard(ex)});
    submit([job = std::move(job), pending = std::move(pending)]() mutable {
      job();
      // The work guard is released only after post() has returned: until then the awaiting
      // io_context cannot run out of work, so its run() cannot return and its owner cannot
      // destroy it while this thread is still inside post().
      auto work = std::move(pending->work);
      net::post(work.get_executor(), [p = std::move(pending)] { std::move(p->handler)(); });
    });
  };
  co_await net::async_initiate<decltype(net::use_awaitable), void()>(initiate,
                                                                     net::use_awaitable);
}

}  // namespace apus::common::io
