// Memcache: the memcached client proxies share state through (tempauth tokens), speaking
// memcached's text protocol and placing keys as Swift's MemcacheRing does, so Apus and Swift
// proxies on the same memcached servers see each other's entries: keys are MD5 hex of the
// logical key, servers are picked on a consistent hash ring (50 points per server), values
// are JSON with flag 2.
//
// Thread-safe: one connection per server per worker thread; calls from a worker's coroutine.
// A server that fails is skipped for `error_suppression` seconds. Failures are not errors for
// callers: get() finds nothing, set() stores nothing.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/status.h"

namespace apus::proxy {

// One entry of memcache_servers.
struct MemcacheServer {
  std::string name;     // as configured: Swift's MemcacheRing places keys by this text
  std::string address;  // the IP it resolved to at start
  uint16_t port = 11211;
};

// memcached's port when an entry names none (Swift's DEFAULT_MEMCACHED_PORT).
inline constexpr uint16_t kDefaultMemcachedPort = 11211;

// Swift's error_suppression_limit and error_suppression_interval (memcache.conf or the cache
// filter): more than `count` failures of one server within `interval` seconds and it is skipped
// for `interval` seconds; an interval of 0 never skips.
struct MemcacheErrorLimit {
  size_t count = 10;
  double interval = 60;
};

class Memcache {
 public:
  // `servers` from parse_servers(). connect/io timeouts in seconds.
  explicit Memcache(std::vector<MemcacheServer> servers, MemcacheErrorLimit error_limit = {},
                    double connect_timeout = 0.3, double io_timeout = 2.0);

  // memcache_servers entries as Swift's parse_socket_string() reads them: "host", "host:port",
  // "[ipv6]" or "[ipv6]:port" (port 11211 when none), each host name resolved now, once (a
  // blocking lookup: call at start-up only). InvalidArgument naming the entry when one is
  // malformed, has a bad port or does not resolve.
  static common::Result<std::vector<MemcacheServer>> parse_servers(
      const std::vector<std::string>& entries);
  ~Memcache();

  // The JSON stored under `key`, or nullopt (missing, not JSON-flagged, or no server).
  boost::asio::awaitable<std::optional<std::string>> get(std::string key);
  // Stores JSON text `json` under `key` for `ttl` seconds (0: no expiry).
  boost::asio::awaitable<void> set(std::string key, std::string json, double ttl);
  // Removes `key` (a missing key is fine).
  boost::asio::awaitable<void> del(std::string key);
  // Stores `value` as it is (Swift's serialize=False), e.g. a counter's new start.
  boost::asio::awaitable<void> set_raw(std::string key, std::string value, double ttl);
  // Swift's incr(): adds `delta` (decr when negative; memcached stops at 0) to the counter
  // under `key`, creating it as max(delta, 0) for `ttl` seconds when missing. The new value,
  // or nullopt when no server answered (Swift's MemcacheConnectionError).
  boost::asio::awaitable<std::optional<int64_t>> incr(std::string key, int64_t delta,
                                                       double ttl = 0);

  // Swift's md5hash(): the key as memcached sees it.
  static std::string hashed(std::string_view key);
  // The servers to try for a hashed key, in order (Swift's _get_conns order).
  std::vector<std::string> servers_for(const std::string& hashed_key) const;

 private:
  boost::asio::awaitable<void> store(std::string key, int flags, std::string data, double ttl);
  // Sends `request` (one command) to the first server for the key that answers; its one-line
  // reply, or nullopt when none answered.
  boost::asio::awaitable<std::optional<std::string>> one_line_command(std::string hashed_key,
                                                                      std::string request);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::proxy
