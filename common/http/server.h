// The HTTP server runtime every Apus server runs on.
//
// Threads (architecture.md): one acceptor thread per listening socket accepts connections and
// puts them on a lock-free MPMC queue (moodycamel ConcurrentQueue), then wakes the least busy
// worker. `workers` threads each run their own io_context and serve many connections at once,
// one C++20 coroutine per connection; a connection stays on the worker that took it. A handler
// is a coroutine too: it reads the request body in chunks, may await blocking work on a
// BlockingPool, and writes its response whole or streamed, so no request ever needs its whole
// body in memory.
//
// Limits follow Swift's eventlet front end: a request line of 8192 bytes or more gets 414, a
// header line of 8192 bytes or more gets 400 "Header Line Too Long", more than 64 KiB of
// headers 400 "Headers Too Large", too many headers 431, a bad Content-Length 400; each closes
// the connection. `client_timeout` bounds every read and write on a client socket: the wait
// for a keep-alive connection's next request (checked by a per-worker sweep, every quarter of
// client_timeout at most, so a waiting connection holds no timer), the head's arrival from its
// first byte, each body read and each write.
//
// Connections: at most `workers * max_clients` client connections are open at once (Swift's
// max_clients counts per worker process; an Apus worker thread stands for one, so a config
// carried over from Swift keeps its capacity). At the cap the acceptor stops accepting and new
// connections wait in the kernel's listen backlog; they are not accepted and dropped. When
// accept() fails for lack of descriptors (EMFILE, ENFILE), the acceptor pauses for
// kAcceptBackoffMs (or until a connection closes) and logs once per episode. start() raises the
// soft RLIMIT_NOFILE to Swift's 32768 (swift-init's MAX_DESCRIPTORS) where the hard limit allows
// (as root, the hard limit too).
//
// Metrics: GET /metrics (Prometheus text) is served only on a separate admin listener
// (metrics_bind_ip, loopback by default; metrics_bind_port), never on the public port, where
// /metrics is an ordinary path for the handler. The admin listener answers nothing else but
// /healthcheck, and its few connections are not counted against max_clients, so a scrape works
// while the public port is full.
//
// Request headers reach the handler as Swift's WSGI layer (eventlet) hands them to Swift:
// names title-cased with '_' turned into '-' ("x-object-meta-under_score" becomes
// "X-Object-Meta-Under-Score"), fields of the same name joined with "," in arrival order, and a
// Content-Type or Content-Length spelled with an underscore dropped (see normalize_wsgi_headers
// in headers.h).
//
// Response heads are checked: a header name, value or reason phrase holding CR, LF or NUL is
// never written; the client gets a 500 instead, the connection closes, and an error is logged.
//
// This header is Beast-free: handlers see only Request, Response and Exchange.
//
// Server is thread-compatible: start(), stop() and wait() are called by one controlling thread.
// Exchange is bound to the worker thread of its connection; call it only from the handler's
// coroutine.
#pragma once

#include <cassert>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/awaitable.hpp>

#include "common/http/headers.h"
#include "common/status.h"

namespace apus::common {
class Metrics;
}

namespace apus::common::http {

// A request as the handler sees it; the body is read through Exchange::read_body().
struct Request {
  std::string method;
  std::string target;  // as received: percent-encoded path plus optional '?' query
  std::string_view path() const;   // target before '?'
  std::string_view query() const;  // target after '?', empty when none
  HeaderMap headers;
  // The header fields as received (names as the client spelt them, repeats apart), kept only
  // when a name has an underscore: the one case where `headers` (WSGI's names, '_' read as
  // '-') loses what was sent. S3 signs names as sent (eventlet's headers_raw, as s3api reads it).
  std::vector<std::pair<std::string, std::string>> raw_headers;
  int version = 11;                        // 10 or 11
  std::optional<uint64_t> content_length;  // nullopt when chunked or absent
  bool chunked = false;
  bool expect_continue = false;
  bool keep_alive = true;
  std::string remote_addr;
  uint16_t remote_port = 0;
};

// A complete response. The runtime adds Date, Content-Length (from body unless set, e.g. for
// HEAD) and Connection: close when the connection ends after it.
struct Response {
  int status = 200;
  std::string reason;  // the reason phrase; empty means reason_phrase(status)
  HeaderMap headers;
  std::string body;
};

// Swift's reason phrase for a status code ("Not Found"), or "Unknown".
std::string_view reason_phrase(int status);

// A value, or the answer refusing the request that asked for it: what a check of request
// input returns when it has a value to give (a check with none returns
// std::optional<Response>, nullopt meaning "go on"). The refusal is a ready response, sent as
// it is:
//   OrRefusal<Timestamp> ts = request_timestamp(req);
//   if (!ts) co_return co_await ex.reply(std::move(ts).refusal());
// Failures below the request layer (disk, peers, parsers) stay Status and Result<T>, and
// become an answer through one mapping per server.
template <class T>
class [[nodiscard]] OrRefusal {
 public:
  OrRefusal(T value) : v_(std::in_place_index<0>, std::move(value)) {}            // NOLINT
  OrRefusal(Response refusal) : v_(std::in_place_index<1>, std::move(refusal)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok().
  const Response& refusal() const& { assert(!ok()); return std::get<1>(v_); }
  Response&& refusal() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Response> v_;
};

// One request and its response on a connection. Every call returns a failed Status once the
// client is gone or too slow (client_timeout); the handler then just returns.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;

  // Reads up to buf.size() body bytes into buf; 0 means the body is complete. Sends "100
  // Continue" first when the client asked for it. InvalidArgument for bad chunked framing,
  // Timeout after client_timeout, Cancelled when the client closed early (a truncated body).
  virtual boost::asio::awaitable<Result<size_t>> read_body(std::span<char> buf) = 0;

  // Sends "100 Continue" now, if the client asked for it and it was not sent yet.
  virtual boost::asio::awaitable<Status> send_continue() = 0;
  // Headers to send with that "100 Continue" (Swift's object server names its MIME
  // capabilities there, X-Obj-Metadata-Footer). Call before it is sent.
  virtual void set_continue_headers(HeaderMap headers) { (void)headers; }
  // The handler will go on reading the request body after its response head is out (SSYNC's
  // conversation over one request): the head then does not say "Connection: close" for the
  // unread body, which would make a client such as Python's http.client drop the connection
  // it still has to write on. Call before the response starts.
  virtual void read_body_after_head() {}
  // The rest of the request body is not worth reading: once the response is out the
  // connection closes at once, without reading what the client still sends (SSYNC after an
  // error line, as Swift's receiver hangs up).
  virtual void close_without_reading_body() {}

  // Sends a whole response. For HEAD no body is sent.
  boost::asio::awaitable<Status> respond(Response response) {
    return do_respond(std::move(response));
  }

  // respond() as a handler's last act, in one statement: `co_return co_await ex.reply(r);`.
  // A failed send means the client is gone, which leaves the handler nothing to do.
  boost::asio::awaitable<void> reply(Response response) {
    return respond_and_drop_status(std::move(response));
  }

  // The next start_response() may hold its head back and send it with the first body chunk
  // (or with finish_response()): one write and one TCP segment for a small body instead of
  // two, and one wake-up for the reader. Only for a body at hand: the client sees the head no
  // sooner than that chunk. A HEAD answer's head, and one whose handler reads the request body
  // after it (read_body_after_head()), still go at once.
  virtual void hold_head_for_body() {}

  // Streams a response: the head (with Content-Length when known, else chunked), then any
  // number of body chunks, then finish.
  boost::asio::awaitable<Status> start_response(int status, HeaderMap headers,
                                                std::optional<uint64_t> length) {
    return do_start_response(status, std::move(headers), length);
  }
  virtual boost::asio::awaitable<Status> write_body(std::string_view chunk) = 0;
  virtual boost::asio::awaitable<Status> finish_response() = 0;

  // True once a response head has been sent (respond() or start_response()).
  virtual bool response_started() const = 0;
  // The status of the response sent or being sent, 0 before.
  virtual int response_status() const = 0;

 protected:
  // GCC 12 destroys a prvalue argument of class type passed straight to a coroutine twice
  // (fixed in GCC 13). Public entry points taking such arguments by value are therefore plain
  // functions that move them into the coroutine, which is safe. Keep this pattern for every
  // coroutine API with class-type parameters taken by value.
  virtual boost::asio::awaitable<Status> do_respond(Response response) = 0;
  boost::asio::awaitable<void> respond_and_drop_status(Response response) {
    (void)co_await do_respond(std::move(response));
  }
  virtual boost::asio::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                                           std::optional<uint64_t> length) = 0;
};

// A request body read whole, when it is at most `max` bytes. A Content-Length over `max` is
// refused before any byte is read (a client that asked for 100 Continue gets none, so it does
// not upload what would be refused); a chunked body as soon as it passes `max`.
struct WholeBody {
  enum class Outcome { kRead, kTooLarge, kFailed };
  Outcome outcome = Outcome::kRead;
  std::string bytes;  // kRead only
  Status failure;     // kFailed: what read_body() said
};
boost::asio::awaitable<WholeBody> read_body_at_most(Exchange& ex, size_t max);

// An Exchange that forwards to another. Its request is the one the wrapped exchange has when
// the wrapper is made, shared rather than copied, until mutable_request() gives the wrapper a
// copy of its own to change (made then, not before: most of a request's wrappers never change
// it, and a copy costs an allocation or two per header); or it is given a request of its own
// at construction. A reference taken from request() before the first mutable_request() goes
// on naming the shared request. Subclasses override what they need to see or change (the
// proxy's middlewares, the object server's `slow`).
class ExchangeWrapper : public Exchange {
 public:
  explicit ExchangeWrapper(Exchange& inner) : inner_(inner), shared_(&inner.request()) {}
  ExchangeWrapper(Exchange& inner, Request request)
      : inner_(inner), shared_(&inner.request()), own_(std::move(request)) {}

  const Request& request() const override { return own_ ? *own_ : *shared_; }
  Request& mutable_request() {
    if (!own_) own_.emplace(*shared_);
    return *own_;
  }
  Exchange& inner() { return inner_; }

  boost::asio::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    return inner_.read_body(buf);
  }
  boost::asio::awaitable<Status> send_continue() override { return inner_.send_continue(); }
  void set_continue_headers(HeaderMap headers) override {
    inner_.set_continue_headers(std::move(headers));
  }
  void read_body_after_head() override { inner_.read_body_after_head(); }
  void close_without_reading_body() override { inner_.close_without_reading_body(); }
  void hold_head_for_body() override { inner_.hold_head_for_body(); }
  boost::asio::awaitable<Status> write_body(std::string_view chunk) override {
    return inner_.write_body(chunk);
  }
  boost::asio::awaitable<Status> finish_response() override { return inner_.finish_response(); }
  bool response_started() const override { return inner_.response_started(); }
  int response_status() const override { return inner_.response_status(); }

 protected:
  boost::asio::awaitable<Status> do_respond(Response response) override {
    return inner_.respond(std::move(response));
  }
  boost::asio::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                                   std::optional<uint64_t> length) override {
    return inner_.start_response(status, std::move(headers), length);
  }

 private:
  Exchange& inner_;
  // The request the inner exchange had when this one was made (found once: a middleware asks
  // for the request often, through every wrapper below it), and this one's own copy, if any.
  const Request* shared_;
  std::optional<Request> own_;
};

using Handler = std::function<boost::asio::awaitable<void>(Exchange&)>;

struct ServerOptions {
  std::string server_type = "apus";  // for the Server header and logs
  std::string bind_ip = "0.0.0.0";
  uint16_t bind_port = 0;  // 0 = any free port; read it back with Server::port()
  int backlog = 4096;
  bool reuse_port = false;
  int workers = 2;
  double client_timeout = 60.0;  // seconds, every read and write on a client socket
  double drain_timeout = 60.0;   // seconds, on stop(): how long in-flight requests may take
  size_t max_request_line = 8192;
  size_t max_header_line = 8192;    // Swift's max_header_size
  size_t max_header_count = 201;    // int(MAX_HEADER_COUNT * 1.6), as Swift's http.client
  size_t max_total_headers = 65536;
  size_t read_buffer_size = 65536;  // network_chunk_size
  // When set, GET /healthcheck answers 200 "OK" before the handler sees it.
  bool builtin_healthcheck = true;
  // Swift's max_clients, per worker (see the top of this file); 0 or less means no cap.
  int max_clients = 1024;
  // The admin listener serving GET /metrics. nullopt: none (the config's metrics_bind_port = 0);
  // 0: any free port, read back with Server::metrics_port().
  std::string metrics_bind_ip = "127.0.0.1";
  std::optional<uint16_t> metrics_bind_port;
};

// How long the acceptor stops accepting after accept() failed for lack of file descriptors,
// unless a connection closes sooner: 10 retries a second instead of a busy loop.
inline constexpr int kAcceptBackoffMs = 100;
// Connections the admin (metrics) listener keeps open at once, besides max_clients.
inline constexpr size_t kMaxAdminConnections = 8;
// How long a reload waits for the new process to serve before giving up on it.
inline constexpr double kSuccessorStartSeconds = 60;
// After a reload, how long the old process keeps idle keep-alive connections open for their
// next request (answered with "Connection: close") before closing them.
inline constexpr std::chrono::seconds kReloadIdleGrace{2};
// The RLIMIT_NOFILE start() asks for: swift-init's MAX_DESCRIPTORS.
inline constexpr uint64_t kWantedOpenFiles = 32768;

// Called after each request with what the access log needs. Runs on the worker thread.
struct RequestRecord {
  const Request* request;
  int status;
  std::optional<uint64_t> content_length;  // as declared in the response; nullopt if chunked
  uint64_t bytes_in;
  uint64_t bytes_out;
  double seconds;  // from headers read to response finished
  double start_time;  // Unix seconds
};
using AccessLogger = std::function<void(const RequestRecord&)>;

class ServerImpl;  // common/http/internal/server.cpp

class Server {
 public:
  // `metrics` may be null; it must outlive the server.
  Server(ServerOptions options, Handler handler, Metrics* metrics = nullptr,
         AccessLogger access_logger = nullptr);
  ~Server();  // stops if running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the acceptor and workers. InvalidArgument for a bad address,
  // IOError when the port cannot be bound.
  Status start();
  // The bound port (after start()).
  uint16_t port() const;
  // The admin listener's bound port (after start()), 0 when there is none.
  uint16_t metrics_port() const;

  // Graceful stop: stop accepting, close idle connections, let in-flight requests finish (up
  // to drain_timeout), then join every thread. Safe to call more than once.
  void stop();

  // Runs until SIGTERM or SIGINT, then stops gracefully; SIGHUP reopens logs meanwhile and
  // SIGUSR2 calls `on_pass_request` (common::wait_for_stop_signal). SIGUSR1 reloads seamlessly:
  // a new copy of the program (common::start_successor) takes the listening sockets, and once
  // it serves this one stops gracefully. start() in a successor serves on the sockets handed
  // over when they are bound where its options say.
  // REQUIRES: common::block_stop_signals() was called in main() before start().
  void run_until_signal(const std::function<void()>& on_pass_request = {});

  // Connections accepted but not yet taken by a worker (approximate).
  size_t accept_queue_depth() const;
  // Connections open now, over all workers (admin connections included).
  size_t open_connections() const;

 private:
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace apus::common::http
