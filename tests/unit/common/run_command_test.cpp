#include <doctest/doctest.h>

#include <chrono>

#include "common/process.h"

using apus::common::run_command;

TEST_CASE("run_command captures stdout and stderr and the exit status") {
  auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 3);
  CHECK_FALSE(r->timed_out);
  CHECK(r->output == "out\nerr\n");
}

TEST_CASE("run_command bounds the output it keeps and reads the rest") {
  auto r = run_command({"sh", "-c", "head -c 100000 /dev/zero"}, 10, 1000);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(r->output.size() == 1000);
}

TEST_CASE("run_command kills a command at its timeout") {
  const auto began = std::chrono::steady_clock::now();
  auto r = run_command({"sleep", "30"}, 0.3);
  REQUIRE(r.ok());
  CHECK(r->timed_out);
  CHECK(r->exit_status == 128 + 9);
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(10));
}

TEST_CASE("run_command: stdin is empty, a missing program is an error") {
  auto r = run_command({"cat"}, 10);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(r->output.empty());
  CHECK_FALSE(run_command({"/nonexistent/apus-no-such-program"}, 10).ok());
  CHECK_FALSE(run_command({}, 10).ok());
}
