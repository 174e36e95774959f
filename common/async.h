// spawn_logged(): start a coroutine whose failure cannot go unnoticed.
//
// `co_spawn(ex, task, net::detached)` swallows an exception that escapes the coroutine: nothing
// is logged, and whatever the coroutine was to do at its end (answer a client, unregister a
// session, count a fan-out reply) silently never happens. spawn_logged() is the one way Apus
// starts a coroutine it does not await: its completion logs an escaped exception at ERROR level
// with `what` (say which request or job it was) and then runs `on_failure`, where the caller
// cleans up (close the connection, release the slot). Nothing may be thrown on purpose across
// this boundary (house style); this is the net for the bug that did.
//
// Header-only and Beast-free; it includes Asio's co_spawn, so include it from .cpp files only.
//
// Thread-safety: on_failure runs on `executor` (the coroutine's own thread or strand), like the
// coroutine's code; it must not throw.
#pragma once

#include <concepts>
#include <exception>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>

#include "common/log/log.h"

namespace apus::common {

// The text of an exception_ptr's exception, for log lines.
inline std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

// A do-nothing on_failure, for spawns with nothing to clean up.
struct NoCleanup {
  void operator()() const noexcept {}
};

// co_spawn's completion handler for spawn_logged(): logs an escaped exception, then cleans up.
template <class OnFailure>
auto logged_completion(std::string what, OnFailure on_failure) {
  return [what = std::move(what), on_failure = std::move(on_failure)](std::exception_ptr e,
                                                                       auto&&...) mutable {
    if (!e) return;
    APUS_LOG_ERROR(what + ": uncaught exception: " + describe_exception(e));
    on_failure();
  };
}

// Starts `task` on `executor`. If an exception escapes it, logs "<what>: uncaught exception:
// <text>" and calls on_failure(). A value the task returns is dropped.
template <class Executor, class T, class OnFailure = NoCleanup>
void spawn_logged(const Executor& executor, boost::asio::awaitable<T> task, std::string what,
                  OnFailure on_failure = {}) {
  boost::asio::co_spawn(executor, std::move(task),
                        logged_completion(std::move(what), std::move(on_failure)));
}

// The same for a coroutine function (a lambda returning an awaitable): co_spawn keeps the
// function object alive in the coroutine's own frame, so its captures outlive the call (an
// immediately invoked lambda coroutine would leave them dangling).
template <class Executor, class F, class OnFailure = NoCleanup>
  requires std::invocable<F&>
void spawn_logged(const Executor& executor, F&& function, std::string what,
                  OnFailure on_failure = {}) {
  boost::asio::co_spawn(executor, std::forward<F>(function),
                        logged_completion(std::move(what), std::move(on_failure)));
}

}  // namespace apus::common
