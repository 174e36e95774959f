// PeriodicThread: passes at their time, at once when asked (run_now: the servers' SIGUSR2), and
// a stop that does not wait for the next pass.
#include "common/periodic_thread.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

// Waits (at most 10 s) until `passes` reaches `n`.
bool reaches(const std::atomic<int>& passes, int n) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (passes.load() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return passes.load() >= n;
}

}  // namespace

TEST_CASE("periodic_thread: run_now starts a pass long before its time, then waits again") {
  std::atomic<int> passes{0};
  apus::common::PeriodicThread thread(3600, false, [&] { ++passes; });
  thread.start();
  CHECK(passes.load() == 0);
  thread.run_now();
  CHECK(reaches(passes, 1));
  thread.run_now();
  CHECK(reaches(passes, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(passes.load() == 2);  // no pass without a request: the next is an hour away
  thread.stop();
}

TEST_CASE("periodic_thread: a request during a pass runs one more pass after it") {
  std::atomic<int> passes{0};
  std::atomic<bool> in_pass{false}, release{false};
  apus::common::PeriodicThread thread(3600, false, [&] {
    in_pass = true;
    while (passes.load() == 0 && !release.load()) std::this_thread::yield();
    ++passes;
    in_pass = false;
  });
  thread.start();
  thread.run_now();
  while (!in_pass.load()) std::this_thread::yield();
  thread.run_now();  // asked while the first pass runs
  release = true;
  CHECK(reaches(passes, 2));
  thread.stop();
}

TEST_CASE("periodic_thread: stop ends an idle thread without waiting for its interval") {
  std::atomic<int> passes{0};
  apus::common::PeriodicThread thread(3600, true, [&] { ++passes; });
  thread.start();
  auto began = std::chrono::steady_clock::now();
  thread.stop();
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(5));
}
