#include "common/http/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <cstdio>
#include <iterator>

#include "common/http/internal/asio_util.h"
#include "common/http/internal/read_head.h"

namespace apus::common::http {

namespace net = boost::asio;
using internal::kAsTuple;
using internal::to_duration;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using net::ip::tcp;

namespace {



Status peer_error(const std::string& peer, const beast::error_code& ec, std::string_view what) {
  std::string msg = std::string(what) + " " + peer + ": " + ec.message();
  if (ec == beast::error::timeout) return Status::timeout(std::move(msg));
  return Status::unavailable(std::move(msg));
}

}  // namespace

// One TCP connection to a peer, carrying one request at a time. Worker-thread only.
class ClientConnectionImpl {
 public:
  ClientConnectionImpl(beast::tcp_stream stream, std::string peer, const ClientOptions& options)
      : stream_(std::move(stream)), peer_(std::move(peer)), options_(options) {}

  net::awaitable<Result<int>> send_head(const ClientRequest& request);
  net::awaitable<Status> write_body(std::span<const std::string_view> pieces, bool last);
  net::awaitable<Status> finish_body();
  net::awaitable<Result<ClientResponse>> read_response_head();
  net::awaitable<Result<size_t>> read_body(std::span<char> buf);

  bool reusable() const { return reusable_ && response_done_; }
  // False when the peer closed the idle connection (or sent something unexpected).
  bool still_open() {
    char byte;
    ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  const std::string& peer() const { return peer_; }
  const HeaderMap& continue_headers() const { return continue_headers_; }
  void set_options(const ClientOptions& options) { options_ = options; }

 private:
  net::awaitable<Status> write(std::span<const net::const_buffer> buffers);
  net::awaitable<Status> read_head_into_parser();
  ClientResponse make_response() const;
  // A parser for the next response: its body unbounded (the caller reads it in pieces), its
  // head up to kMaxResponseHead.
  void new_parser() {
    parser_.emplace();
    parser_->body_limit(boost::none);
    parser_->header_limit(static_cast<uint32_t>(kMaxResponseHead));
  }

  // What a storage server may answer with: the 64 KiB of headers our servers (and Swift's
  // eventlet) take in a request, since a container's metadata comes back whole in its HEAD (an
  // S3 bucket's ACL, CORS rules, tags and policy are up to 8 or 20 KiB each). Beast's default
  // of 8 KiB made such a bucket's every request fail, and the failures error-limited the
  // container servers for every other container too.
  static constexpr size_t kMaxResponseHead = 64 * 1024;

  beast::tcp_stream stream_;
  std::string peer_;
  ClientOptions options_;
  beast::flat_buffer buffer_;
  // Reads the head only; framing_ finds the body.
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  BodyFraming framing_ = BodyFraming::none();  // where the response body's bytes are
  // After a final response's head: where its body is (the parser read the head only).
  void head_done() {
    head_read_ = true;
    framing_ = internal::body_framing_of(*parser_);
    response_done_ = framing_.done();
  }
  std::vector<std::string> masked_names_;  // field names the parser saw masked (read_head())
  HeaderMap continue_headers_;             // the last 100 Continue's
  // A request head that goes out with the first body bytes (a body sent without waiting for
  // 100 Continue): one write and one segment instead of two, and one wake-up of the peer.
  std::string held_head_;
  bool chunked_request_ = false;
  bool body_ended_ = false;  // the last chunk went out
  bool head_only_ = false;
  bool head_read_ = false;
  bool response_done_ = false;
  bool reusable_ = false;
};

net::awaitable<Status> ClientConnectionImpl::write(std::span<const net::const_buffer> buffers) {
  stream_.expires_after(to_duration(options_.node_timeout));
  auto [ec, n] = co_await net::async_write(stream_, buffers, kAsTuple);
  if (ec) {
    reusable_ = false;
    co_return peer_error(peer_, ec, "write to");
  }
  co_return Status();
}

net::awaitable<Result<int>> ClientConnectionImpl::send_head(const ClientRequest& request) {
  new_parser();
  continue_headers_.clear();
  head_only_ = request.method == "HEAD";
  if (head_only_) parser_->skip(true);
  head_read_ = false;
  response_done_ = false;
  reusable_ = true;
  chunked_request_ = request.chunked && !request.content_length;
  body_ended_ = false;

  std::string head;
  head.reserve(512);
  head.append(request.method).append(" ").append(request.target).append(" HTTP/1.1\r\n");
  bool has_host = false;
  for (const auto& [name, value] : request.headers) {
    if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") ||
        iequals(name, "Expect")) {
      continue;  // framing comes from the ClientRequest fields
    }
    if (iequals(name, "Host")) has_host = true;
    if (iequals(name, "Connection") && iequals(value, "close")) reusable_ = false;
    head.append(name).append(": ").append(value).append("\r\n");
  }
  if (!has_host) head.append("Host: ").append(peer_).append("\r\n");
  if (request.content_length) {
    head.append("Content-Length: ").append(std::to_string(*request.content_length)).append("\r\n");
  } else if (chunked_request_) {
    head.append("Transfer-Encoding: chunked\r\n");
  }
  if (request.expect_continue) head.append("Expect: 100-continue\r\n");
  head.append("\r\n");
  held_head_.clear();
  const bool has_body = chunked_request_ || request.content_length.value_or(0) > 0;
  if (has_body && !request.expect_continue) {
    held_head_ = std::move(head);
    co_return 0;
  }
  std::array<net::const_buffer, 1> buffers{net::buffer(head)};
  APUS_CO_RETURN_IF_ERROR(co_await write(buffers));
  if (!request.expect_continue) co_return 0;

  // Wait for "100 Continue" or a final answer (a 4xx/5xx refusing the body).
  for (;;) {
    Status s = co_await read_head_into_parser();
    if (!s.ok()) co_return s;
    int status = static_cast<int>(parser_->get().result_int());
    if (status == 100) {
      continue_headers_ = make_response().headers;
      new_parser();  // the interim response is done; the real one follows the body
      if (head_only_) parser_->skip(true);
      co_return 100;
    }
    if (status > 100 && status < 200) {
      new_parser();
      continue;  // other interim responses are ignored
    }
    head_done();
    // The peer answered without taking the body: this connection cannot be reused.
    reusable_ = false;
    co_return status;
  }
}

net::awaitable<Status> ClientConnectionImpl::read_head_into_parser() {
  stream_.expires_after(to_duration(options_.node_timeout));
  beast::error_code ec =
      co_await internal::read_head(stream_, buffer_, *parser_, kMaxResponseHead, masked_names_);
  if (ec) {
    reusable_ = false;
    co_return peer_error(peer_, ec, "read from");
  }
  co_return Status();
}

constexpr std::string_view kLastChunk = "0\r\n\r\n";

net::awaitable<Status> ClientConnectionImpl::write_body(std::span<const std::string_view> pieces,
                                                       bool last) {
  last = last && chunked_request_ && !body_ended_;
  // Framed in place, up to kMaxPieces pieces per write: no allocation per write (this is every
  // PUT body's path). The pieces of one write go as one chunk: a reader of ours takes a chunk's
  // bytes straight into its buffer (read_framed_body()), so fewer, larger chunks mean fewer
  // reads.
  constexpr size_t kMaxPieces = 16;
  std::array<net::const_buffer, kMaxPieces + 4> buffers;  // + head, size line, CRLF, last chunk
  std::array<char, 20> size_line;
  do {
    const auto batch = pieces.first(std::min(pieces.size(), kMaxPieces));
    pieces = pieces.subspan(batch.size());
    size_t size = 0;
    for (std::string_view piece : batch) size += piece.size();
    const bool framed = chunked_request_ && size > 0;  // an empty chunk would end the body
    size_t used = 0;
    if (!held_head_.empty()) buffers[used++] = net::buffer(held_head_);
    if (framed) {
      int n = std::snprintf(size_line.data(), size_line.size(), "%zx\r\n", size);
      buffers[used++] = net::buffer(size_line.data(), static_cast<size_t>(n));
    }
    for (std::string_view piece : batch) {
      if (!piece.empty()) buffers[used++] = net::buffer(piece);
    }
    if (framed) buffers[used++] = net::buffer("\r\n", 2);
    if (last && pieces.empty()) buffers[used++] = net::buffer(kLastChunk.data(), kLastChunk.size());
    if (used > 0) APUS_CO_RETURN_IF_ERROR(co_await write(std::span(buffers.data(), used)));
    held_head_.clear();
  } while (!pieces.empty());
  if (last) body_ended_ = true;
  co_return Status();
}

net::awaitable<Status> ClientConnectionImpl::finish_body() {
  return write_body({}, true);
}

ClientResponse ClientConnectionImpl::make_response() const {
  const auto& msg = parser_->get();
  ClientResponse r;
  r.status = static_cast<int>(msg.result_int());
  // One allocation for the fields, not one per doubling (a GET's answer has about twenty).
  r.headers.reserve(static_cast<size_t>(std::distance(msg.begin(), msg.end())));
  for (const auto& field : msg) {
    r.headers.add(unmask_field_name(field.name_string(), masked_names_), field.value());
  }
  if (auto len = parser_->content_length()) r.content_length = *len;
  r.keep_alive = msg.keep_alive();
  return r;
}

net::awaitable<Result<ClientResponse>> ClientConnectionImpl::read_response_head() {
  if (!parser_) co_return Status::invalid_argument("no request sent");
  if (!held_head_.empty()) {
    // Nothing of the body was written: the head goes alone (the caller owes the peer the body).
    std::array<net::const_buffer, 1> buffers{net::buffer(held_head_)};
    Status sent = co_await write(buffers);
    held_head_.clear();
    if (!sent.ok()) co_return sent;
  }
  if (!head_read_) {
    for (;;) {
      Status s = co_await read_head_into_parser();
      if (!s.ok()) co_return s;
      int status = static_cast<int>(parser_->get().result_int());
      if (status >= 200 || status < 100) break;
      new_parser();  // a late or extra interim response
      if (head_only_) parser_->skip(true);
    }
    head_done();
  }
  ClientResponse r = make_response();
  if (!r.keep_alive) reusable_ = false;
  co_return r;
}

net::awaitable<Result<size_t>> ClientConnectionImpl::read_body(std::span<char> buf) {
  if (!head_read_) co_return Status::invalid_argument("response head not read");
  if (response_done_) co_return size_t{0};
  auto [ec, got] = co_await internal::read_framed_body(stream_, buffer_, framing_, buf, [this] {
    stream_.expires_after(to_duration(options_.node_timeout));
  });
  if (ec) {
    reusable_ = false;
    if (framing_.failed())
      co_return Status::unavailable(std::string("bad body from ") + peer_ + ": " +
                                    framing_.error());
    co_return peer_error(peer_, ec, "read body from");
  }
  if (framing_.done()) response_done_ = true;
  co_return got;
}

// ---- ClientConnection --------------------------------------------------------------------

ClientConnection::ClientConnection(std::unique_ptr<ClientConnectionImpl> impl)
    : impl_(std::move(impl)) {}
ClientConnection::~ClientConnection() = default;

net::awaitable<Result<int>> ClientConnection::send_head(const ClientRequest& request) {
  return impl_->send_head(request);
}
net::awaitable<Status> ClientConnection::write_body(std::string_view chunk) {
  // A coroutine, so that `chunk`, which the span points at, lives as long as the write.
  co_return co_await impl_->write_body(std::span(&chunk, 1), false);
}
net::awaitable<Status> ClientConnection::write_body(std::span<const std::string_view> pieces,
                                                    bool last) {
  return impl_->write_body(pieces, last);
}
net::awaitable<Status> ClientConnection::finish_body() { return impl_->finish_body(); }
net::awaitable<Result<ClientResponse>> ClientConnection::read_response_head() {
  return impl_->read_response_head();
}
net::awaitable<Result<size_t>> ClientConnection::read_body(std::span<char> buf) {
  return impl_->read_body(buf);
}

net::awaitable<Result<std::string>> ClientConnection::read_body_all(size_t limit) {
  std::string out;
  std::array<char, 16384> buf;
  for (;;) {
    Result<size_t> n = co_await impl_->read_body(buf);
    if (!n.ok()) co_return n.status();
    if (*n == 0) co_return out;
    if (out.size() + *n > limit) co_return Status::invalid_argument("response body too large");
    out.append(buf.data(), *n);
  }
}

bool ClientConnection::reusable() const { return impl_->reusable(); }
const std::string& ClientConnection::peer() const { return impl_->peer(); }
const HeaderMap& ClientConnection::continue_headers() const { return impl_->continue_headers(); }

// ---- ConnectionPool ----------------------------------------------------------------------

ConnectionPool::ConnectionPool(ClientOptions options) : options_(options) {}
ConnectionPool::~ConnectionPool() = default;

ConnectionPool& ConnectionPool::for_this_thread() {
  // A worker thread runs one io_context, so its idle sockets stay with their io_context.
  thread_local ConnectionPool pool(ClientOptions{});
  return pool;
}

net::awaitable<Result<std::unique_ptr<ClientConnection>>> ConnectionPool::connect(
    const std::string& host, uint16_t port) {
  return connect(host, port, options_);
}

net::awaitable<Result<std::unique_ptr<ClientConnection>>> ConnectionPool::connect(
    const std::string& host, uint16_t port, ClientOptions options) {
  std::string peer = host + ":" + std::to_string(port);
  auto it = idle_.find(peer);
  if (it != idle_.end()) {
    auto& idle = it->second;
    while (!idle.empty()) {
      std::unique_ptr<ClientConnection> c = std::move(idle.back());
      idle.pop_back();
      if (c->impl_->still_open()) {
        c->reused_ = true;
        c->impl_->set_options(options);
        co_return std::move(c);
      }
    }
  }
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) co_return Status::invalid_argument("not an IP address: " + host);
  auto executor = co_await net::this_coro::executor;
  beast::tcp_stream stream(executor);
  stream.expires_after(to_duration(options.conn_timeout));
  auto [cec] = co_await stream.async_connect(tcp::endpoint(address, port), kAsTuple);
  if (cec) co_return peer_error(peer, cec, "connect to");
  stream.socket().set_option(tcp::no_delay(true), ec);
  co_return std::make_unique<ClientConnection>(
      std::make_unique<ClientConnectionImpl>(std::move(stream), peer, options));
}

void ConnectionPool::release(std::unique_ptr<ClientConnection> connection) {
  if (!connection || !connection->reusable()) return;
  auto& idle = idle_[connection->peer()];
  if (idle.size() >= options_.max_idle_per_peer) return;
  idle.push_back(std::move(connection));
}

size_t ConnectionPool::idle_connections() const {
  size_t n = 0;
  for (const auto& [peer, conns] : idle_) n += conns.size();
  return n;
}

// ---- helpers -----------------------------------------------------------------------------

namespace {

// One attempt of simple_request(); `answered` tells whether any of the response arrived.
net::awaitable<Result<SimpleResponse>> one_exchange(ConnectionPool& pool, ClientConnection& c,
                                                    const ClientRequest& request,
                                                    std::string_view body, size_t max_body,
                                                    bool& answered) {
  auto sent = co_await c.send_head(request);
  if (!sent.ok()) co_return sent.status();
  if (*sent == 0 || *sent == 100) {
    APUS_CO_RETURN_IF_ERROR(co_await c.write_body(body));
    APUS_CO_RETURN_IF_ERROR(co_await c.finish_body());
  }
  auto head = co_await c.read_response_head();
  if (!head.ok()) co_return head.status();
  answered = true;
  auto content = co_await c.read_body_all(max_body);
  if (!content.ok()) co_return content.status();
  (void)pool;
  co_return SimpleResponse{std::move(*head), std::move(*content)};
}

}  // namespace

net::awaitable<Result<StartedRequest>> start_request_impl(ConnectionPool& pool,
                                                          ClientOptions options,
                                                          const std::string& host, uint16_t port,
                                                          ClientRequest request) {
  const bool bodyless = !request.expect_continue && !request.chunked &&
                        request.content_length.value_or(0) == 0;
  for (int attempt = 0;; ++attempt) {
    auto conn = co_await pool.connect(host, port, options);
    if (!conn.ok()) co_return conn.status();
    Result<int> status = co_await (*conn)->send_head(request);
    if (status.ok() && bodyless) {
      auto head = co_await (*conn)->read_response_head();
      status = head.ok() ? Result<int>(head->status) : Result<int>(head.status());
    }
    if (status.ok()) co_return StartedRequest{std::move(*conn), *status};
    if (!(*conn)->reused() || attempt > 0) co_return status.status();
  }
}

net::awaitable<Result<SimpleResponse>> simple_request_impl(ConnectionPool& pool,
                                                           ClientOptions options,
                                                           const std::string& host,
                                                           uint16_t port, ClientRequest request,
                                                           std::string_view body,
                                                           size_t max_body) {
  if (!body.empty() && !request.chunked) request.content_length = body.size();
  for (int attempt = 0;; ++attempt) {
    auto conn = co_await pool.connect(host, port, options);
    if (!conn.ok()) co_return conn.status();
    bool answered = false;
    auto out = co_await one_exchange(pool, **conn, request, body, max_body, answered);
    if (out.ok()) {
      pool.release(std::move(*conn));
      co_return out;
    }
    bool stale = (*conn)->reused() && !answered && !out.status().is_timeout();
    if (!stale || attempt > 0) co_return out.status();
  }
}

}  // namespace apus::common::http
