#include "common/io/blocking_pool.h"

#include "common/metrics/metrics.h"

#include <doctest/doctest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>

namespace net = boost::asio;
using apus::common::io::BlockingPool;

TEST_CASE("BlockingPool::call runs on a pool thread and resumes on the caller's executor") {
  BlockingPool pool("test", 2);
  net::io_context ioc;
  std::thread::id loop_thread = std::this_thread::get_id();
  std::thread::id job_thread, resumed_thread;
  int result = 0;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        result = co_await pool.call([&] {
          job_thread = std::this_thread::get_id();
          return 42;
        });
        resumed_thread = std::this_thread::get_id();
      },
      net::detached);
  ioc.run();
  CHECK(result == 42);
  CHECK(job_thread != loop_thread);
  CHECK(resumed_thread == loop_thread);
}

TEST_CASE("BlockingPool keeps the loop free while a job blocks") {
  BlockingPool pool("test", 1);
  net::io_context ioc;
  std::atomic<bool> release{false};
  int loop_ticks = 0;
  bool job_done = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        co_await pool.run([&] {
          while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
        job_done = true;
      },
      net::detached);
  // Another coroutine on the same loop makes progress while the job blocks.
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        for (int i = 0; i < 100; ++i) {
          ++loop_ticks;
          co_await net::post(ioc, net::use_awaitable);
        }
        release = true;
      },
      net::detached);
  ioc.run();
  CHECK(loop_ticks == 100);
  CHECK(job_done);
}

TEST_CASE("BlockingPool runs many jobs and drains on destruction") {
  std::atomic<int> ran{0};
  {
    BlockingPool pool("test", 3);
    for (int i = 0; i < 1000; ++i) pool.submit([&] { ran.fetch_add(1); });
  }
  CHECK(ran.load() == 1000);
}

TEST_CASE("BlockingPool::call returns move-only results") {
  BlockingPool pool("test", 1);
  net::io_context ioc;
  std::unique_ptr<int> got;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        got = co_await pool.call([] { return std::make_unique<int>(7); });
      },
      net::detached);
  ioc.run();
  REQUIRE(got);
  CHECK(*got == 7);
}

TEST_CASE("BlockingPool::export_metrics samples queue depth and busy threads") {
  apus::common::Metrics metrics("test");
  std::atomic<bool> release{false};  // outlives the pool, whose first job watches it
  BlockingPool pool("sdb1", 1);
  pool.export_metrics(metrics);
  pool.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  pool.submit([] {});
  pool.submit([] {});
  while (pool.busy() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string text = metrics.serialize();
  release = true;
  CHECK(text.find("apus_pool_queue_depth{pool=\"sdb1\",server=\"test\"} 2") != std::string::npos);
  CHECK(text.find("apus_pool_busy_threads{pool=\"sdb1\",server=\"test\"} 1") != std::string::npos);
}
