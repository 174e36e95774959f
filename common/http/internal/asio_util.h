// Small helpers the Asio-based files of common/ share (server, backend client). Internal: only
// .cpp files that already include Asio use it.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

namespace apus::common::http::internal {

// Completion token for co_await that returns (error_code, ...) instead of throwing.
inline constexpr auto kAsTuple = boost::asio::as_tuple(boost::asio::use_awaitable);

// Seconds from a config value as a steady_clock duration.
inline std::chrono::steady_clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

}  // namespace apus::common::http::internal
