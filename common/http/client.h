// The backend HTTP client: how proxies and storage servers talk to object, container and
// account servers.
//
// A ConnectionPool keeps idle keep-alive connections per peer for one worker thread (take it
// with ConnectionPool::for_this_thread(); a pool and its connections never cross threads).
// Timeouts belong to each connect() (a pooled connection takes the new caller's), so callers
// with different timeouts share one pool. A ClientConnection carries one request at a time:
// send the head (optionally with `Expect: 100-continue`, then wait for the peer's 100 or its
// final answer), stream the body, read the response head and stream the response body.
// `conn_timeout` bounds connecting and `node_timeout` bounds every later read and write, as in
// Swift.
//
// Beast-free header. Thread-compatible: a connection and its pool are used on one worker thread,
// and a pool must be destroyed before the io_context its connections were made on.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/headers.h"
#include "common/status.h"

namespace apus::common::http {

struct ClientOptions {
  double conn_timeout = 0.5;   // seconds to connect
  double node_timeout = 3.0;   // seconds for every later read or write
  size_t max_idle_per_peer = 64;
};

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // percent-encoded path and query
  HeaderMap headers;
  // Body framing: a known length, or chunked when `chunked` is set. No body otherwise.
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool expect_continue = false;
};

struct ClientResponse {
  int status = 0;
  HeaderMap headers;
  std::optional<uint64_t> content_length;
  bool keep_alive = false;
};

class ClientConnectionImpl;

class ClientConnection {
 public:
  explicit ClientConnection(std::unique_ptr<ClientConnectionImpl> impl);
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Sends the request head. Without expect_continue returns 0. With it, waits up to
  // node_timeout for the peer: 100 when the body may follow, or the final status (then read
  // the rest with read_response_head()). Timeout/Unavailable when the peer is slow or gone.
  boost::asio::awaitable<Result<int>> send_head(const ClientRequest& request);
  // The headers of the peer's 100 Continue to the last send_head() (Swift's object servers name
  // their MIME capabilities there); empty when there was none.
  const HeaderMap& continue_headers() const;
  // Sends body bytes (chunk-framed when the request is chunked).
  boost::asio::awaitable<Status> write_body(std::string_view chunk);
  // Sends several pieces of body together (each its own chunk when the request is chunked)
  // and, with `last`, the end of the body too: one write per 16 pieces instead of one per
  // piece, so a small PUT's pieces reach the peer in one segment. `pieces` must stay valid
  // until the write completes.
  boost::asio::awaitable<Status> write_body(std::span<const std::string_view> pieces, bool last);
  // Ends the body (the last chunk for chunked requests); a no-op for a fixed length, or once
  // a write_body(..., last) has ended it.
  boost::asio::awaitable<Status> finish_body();
  // Reads the response head (returns the one already read by send_head, if any).
  boost::asio::awaitable<Result<ClientResponse>> read_response_head();
  // Reads up to buf.size() response body bytes; 0 at the end of the body.
  boost::asio::awaitable<Result<size_t>> read_body(std::span<char> buf);
  // Reads the whole remaining body; InvalidArgument when it is longer than `limit`.
  boost::asio::awaitable<Result<std::string>> read_body_all(size_t limit);

  // Whether the connection can carry another request (response fully read, keep-alive).
  bool reusable() const;
  // Whether it came from the pool's idle connections (the peer may have closed it since).
  bool reused() const { return reused_; }
  const std::string& peer() const;

 private:
  friend class ConnectionPool;  // checks idle connections before reuse
  std::unique_ptr<ClientConnectionImpl> impl_;
  bool reused_ = false;
};

class ConnectionPool {
 public:
  explicit ConnectionPool(ClientOptions options);
  ~ConnectionPool();

  // The pool of the calling worker thread (with default timeouts: pass yours to connect()).
  static ConnectionPool& for_this_thread();

  // An idle connection to host:port, or a new one, with the timeouts of `options` (the pool's
  // own when not given). Unavailable when the peer refuses, Timeout after conn_timeout.
  boost::asio::awaitable<Result<std::unique_ptr<ClientConnection>>> connect(
      const std::string& host, uint16_t port);
  boost::asio::awaitable<Result<std::unique_ptr<ClientConnection>>> connect(
      const std::string& host, uint16_t port, ClientOptions options);
  // Gives a connection back: kept if reusable(), closed otherwise.
  void release(std::unique_ptr<ClientConnection> connection);

  const ClientOptions& options() const { return options_; }
  size_t idle_connections() const;

 private:
  ClientOptions options_;
  std::map<std::string, std::vector<std::unique_ptr<ClientConnection>>> idle_;  // "host:port"
};

// The start of a streamed exchange: a connection (pooled or new) with `request`'s head sent.
// With Expect: 100-continue, `status` is 100 (send the body) or the peer's final status; for a
// request without a body it is the response's status, its head read (read_response_head()
// gives it again); otherwise 0. A pooled connection the peer closed while idle is tried once
// more on a new one, so callers never see that failure.
struct StartedRequest {
  std::unique_ptr<ClientConnection> conn;
  int status = 0;
};
boost::asio::awaitable<Result<StartedRequest>> start_request_impl(ConnectionPool& pool,
                                                                  ClientOptions options,
                                                                  const std::string& host,
                                                                  uint16_t port,
                                                                  ClientRequest request);
inline boost::asio::awaitable<Result<StartedRequest>> start_request(
    ConnectionPool& pool, const ClientOptions& options, const std::string& host, uint16_t port,
    ClientRequest request) {
  return start_request_impl(pool, options, host, port, std::move(request));
}

// A whole exchange for small bodies: connect, send, read the response and its body (at most
// `max_body` bytes), release the connection. When a pooled keep-alive connection fails before
// any answer (the peer closed it while idle), the request is sent once more on a new one.
struct SimpleResponse {
  ClientResponse head;
  std::string body;
};
// `options` gives the timeouts (the pool's own in the first form).
// (Plain functions over a coroutine: see the GCC 12 note in common/http/server.h.)
boost::asio::awaitable<Result<SimpleResponse>> simple_request_impl(
    ConnectionPool& pool, ClientOptions options, const std::string& host, uint16_t port,
    ClientRequest request, std::string_view body, size_t max_body);
inline boost::asio::awaitable<Result<SimpleResponse>> simple_request(
    ConnectionPool& pool, const std::string& host, uint16_t port, ClientRequest request,
    std::string_view body = {}, size_t max_body = 1 << 20) {
  return simple_request_impl(pool, pool.options(), host, port, std::move(request), body,
                             max_body);
}
inline boost::asio::awaitable<Result<SimpleResponse>> simple_request(
    ConnectionPool& pool, const ClientOptions& options, const std::string& host, uint16_t port,
    ClientRequest request, std::string_view body = {}, size_t max_body = 1 << 20) {
  return simple_request_impl(pool, options, host, port, std::move(request), body, max_body);
}

}  // namespace apus::common::http
