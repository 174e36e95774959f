// The server runtime: acceptor thread (public and admin listeners, max_clients, EMFILE
// back-off), lock-free hand-off queue, workers with one io_context each, and the per-connection
// HTTP session (Beast parser, our own response writer, which refuses CR/LF/NUL in a head).
#include "common/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <concurrentqueue/concurrentqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>
#include <unordered_set>
#include <vector>

#include "common/assert.h"
#include "common/async.h"
#include "common/http/date.h"
#include "common/http/internal/asio_util.h"
#include "common/http/internal/read_head.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/process.h"
#include "common/thread_annotations.h"

namespace apus::common::http {

namespace net = boost::asio;
using internal::kAsTuple;
using internal::to_duration;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using net::ip::tcp;

namespace {

// Above this a connection's read buffer is released between requests.
constexpr size_t kIdleBufferBytes = 16384;


double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The Date header value, formatted at most once a second per thread.
const std::string& cached_date() {
  thread_local std::time_t last = 0;
  thread_local std::string value;
  std::time_t now = std::time(nullptr);
  if (now != last) {
    last = now;
    value = format_http_date(now);
  }
  return value;
}

// A canned error sent before the request reached a handler; the connection then closes, as
// eventlet does for these.
std::string canned_response(int status, std::string_view reason) {
  std::string out = "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason;
  out += "\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  return out;
}

// `text` with CR, LF, NUL and other control bytes written as \xNN, for a log line.
std::string escape_for_log(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The first header name or value (or the reason phrase) that must not go into a response head,
// described for the log; nullopt when everything is safe.
std::optional<std::string> unsafe_head_field(const HeaderMap& headers, std::string_view reason) {
  if (!is_safe_header_text(reason)) return "reason phrase \"" + escape_for_log(reason) + "\"";
  for (const auto& [name, value] : headers) {
    if (!is_safe_header_text(name) || !is_safe_header_text(value)) {
      return "header \"" + escape_for_log(name) + ": " + escape_for_log(value) + "\"";
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view Request::path() const {
  auto q = target.find('?');
  return std::string_view(target).substr(0, q);
}

std::string_view Request::query() const {
  auto q = target.find('?');
  return q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1);
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Request Entity Too Large";
    case 414: return "Request URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Requested Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 498: return "Rate Limited";
    case 499: return "Client Disconnect";
    case 500: return "Internal Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
  }
}

class Session;

// A worker: one thread running one io_context. Sessions live on exactly one worker.
// Thread-compatible; members below marked "worker thread" are touched only by that thread.
struct Worker {
  net::io_context ioc{1};
  // Keeps run() going while the worker has no connection; released by stop() after the drain,
  // so run() returns once the last handler, timer and disk-pool completion is done.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> keep_running{
      ioc.get_executor()};
  std::thread thread;
  std::atomic<size_t> connections{0};
  bool draining = false;                   // worker thread
  bool idle_closed = false;                // worker thread: close_idle_sessions() ran
  std::unordered_set<Session*> sessions;   // worker thread
  // A connection waiting for its next request (Session::wait_for_request) holds no timer of
  // its own: this one, armed only while some session waits, closes those that waited longer
  // than client_timeout. Worker thread.
  net::steady_timer idle_sweep{ioc};
  bool idle_sweep_armed = false;
  size_t waiting = 0;  // sessions in wait_for_request

  // True on this worker's thread (inside ioc.run()): the debug check loop-only code makes.
  bool on_loop() { return ioc.get_executor().running_in_this_thread(); }
};

// An accepted connection on its way from the acceptor to a worker.
struct Accepted {
  int fd = -1;
  bool admin = false;  // from the admin (metrics) listener
};

// One listening socket: the public port or the admin one.
struct ListenSocket {
  int fd = -1;
  uint16_t port = 0;
  bool admin = false;
  size_t limit = 0;               // connections it may have open at once
  std::atomic<size_t> open{0};    // accepted and not yet closed (queued ones included)
};

class ServerImpl {
 public:
  ServerImpl(ServerOptions options, Handler handler, Metrics* metrics, AccessLogger access_logger)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        metrics_(metrics),
        access_logger_(std::move(access_logger)) {}

  Status start();
  void stop();
  // A session ended (or an accepted connection was dropped before it became one): frees its
  // place under max_clients.
  void connection_closed(bool admin);
  void session_finished(Worker& worker, Session* session, bool admin);

  ServerOptions options_;
  Handler handler_;
  Metrics* metrics_;
  AccessLogger access_logger_;

  ListenSocket public_;
  ListenSocket admin_;  // fd -1 when there is no admin listener
  int stop_fd_ = -1;  // eventfd that wakes the acceptor on stop()
  // eventfd that wakes the acceptor when a connection closes while it waits for room (at the
  // cap, or backing off after EMFILE); written only when wake_wanted_ is set.
  int wake_fd_ = -1;
  std::atomic<bool> wake_wanted_{false};
  std::thread acceptor_;
  moodycamel::ConcurrentQueue<Accepted> accepted_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> open_connections_{0};
  Mutex drain_mutex_;
  CondVar drained_;  // waits with drain_mutex_
  int workers_finished_ APUS_GUARDED_BY(drain_mutex_) = 0;
  bool running_ = false;
  bool handed_over_ = false;  // hand_over() succeeded: stop() lets idle connections go gently

 private:
  Status bind_and_listen(const std::string& ip, uint16_t port, ListenSocket& out);
  // Takes the listening socket a reload's predecessor handed over as `name` when it is bound
  // to ip:port (port 0: any); false (and nothing changed) otherwise.
  bool adopt_inherited(std::string_view name, const std::string& ip, uint16_t port,
                       ListenSocket& out);

 public:
  // Seamless reload: starts a successor on this server's listening sockets and returns true
  // once it serves (the caller then stop()s this one); false when it could not.
  bool hand_over();

 private:
  void accept_loop();
  // Accepts what `ls` has pending, up to its limit. Sets *out_of_fds when accept() failed for
  // lack of descriptors.
  void accept_pending(ListenSocket& ls, bool* out_of_fds);
  bool has_room(const ListenSocket& ls) const {
    return ls.open.load(std::memory_order_seq_cst) < ls.limit;
  }
  void take_connection(Worker& worker);
  Worker& least_busy_worker();
  void close_idle_sessions(Worker& worker);

 public:
  // Arms `worker`'s idle sweep unless it is armed: every quarter of client_timeout (at least
  // 10 ms, at most 1 s) while some session waits for a request, it walks the worker's
  // sessions (a few nanoseconds each: ~0.1 ms a second with 20,000 connections on a worker)
  // and closes those that waited too long. No session waiting, no wake-up.
  void arm_idle_sweep(Worker& worker);

 private:
  void sweep_idle(Worker& worker);

  // Acceptor thread only: the EMFILE episode in progress, for one log line per episode.
  bool out_of_fds_episode_ = false;
  std::chrono::steady_clock::time_point episode_start_;
  uint64_t episode_failures_ = 0;
};

// One client connection: reads requests one after another (keep-alive), runs the handler for
// each, and writes responses. Thread-compatible; all calls on its worker's thread.
class Session : public Exchange, public std::enable_shared_from_this<Session> {
 public:
  Session(ServerImpl& server, Worker& worker, tcp::socket socket, bool admin)
      : server_(server), worker_(worker), admin_(admin), stream_(std::move(socket)) {
    buffer_.max_size(server_.options_.max_request_line + server_.options_.max_total_headers +
                     server_.options_.read_buffer_size);
  }

  net::awaitable<void> run();
  // Closes the connection and unregisters the session from its worker; once only. run() ends
  // with it, and spawn_logged's failure path calls it when an exception ended run() early.
  void close_and_finish();
  // Closes the socket if the session is waiting for a new request (used when draining).
  void close_if_idle() {
    if (idle_) close_socket();
  }
  // Closes the socket if the session waits for its next request and its time is up at `now`
  // (the idle sweep).
  void close_if_waited_out(std::chrono::steady_clock::time_point now) {
    if (waiting_ && waiting_until_ <= now) close_socket();
  }

  // Exchange
  const Request& request() const override { return request_; }
  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override;
  net::awaitable<Status> send_continue() override;
  void set_continue_headers(HeaderMap headers) override { continue_headers_ = std::move(headers); }
  void read_body_after_head() override { body_after_head_ = true; }
  void close_without_reading_body() override { skip_unread_body_ = true; }
  void hold_head_for_body() override { hold_head_ = true; }
  net::awaitable<Status> write_body(std::string_view chunk) override;
  net::awaitable<Status> finish_response() override;
  bool response_started() const override { return status_ != 0; }
  int response_status() const override { return status_; }

 protected:
  net::awaitable<Status> do_respond(Response response) override;
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override;

 private:
  enum class HeadResult { kOk, kClosed, kRejected };
  // Reads the first bytes of the client's next request (or its first), holding no parser,
  // timer or coroutine of the head's meanwhile: thousands of pooled client connections sit
  // idle at once, and a read of the head would hold ~0.8 KiB more each. The worker's idle
  // sweep enforces client_timeout. False when the connection closed or is to close.
  net::awaitable<bool> wait_for_request();
  // How long a client has to send the next request's head: client_timeout, and while the
  // worker drains a short while at most, so a silent client does not hold the old process of a
  // reload (one already waiting keeps the time it had).
  std::chrono::steady_clock::duration head_timeout() const {
    const double t = server_.options_.client_timeout;
    return to_duration(worker_.draining ? std::min(t, 2.0) : t);
  }
  void close_socket() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }
  net::awaitable<HeadResult> read_request_head();
  net::awaitable<void> reject(int status, std::string_view reason);
  // Answers 500 instead of a response whose head would carry CR, LF or NUL (`what` names the
  // field), and closes the connection after it. Returns the failure the handler gets.
  net::awaitable<Status> refuse_unsafe_head(const std::string& what);
  // Swift's per-line and count limits on a parsed head: the refusal to send, if any.
  std::optional<std::pair<int, std::string_view>> check_limits() const;
  void fill_request();
  // Frees what the last request held before the connection waits for its next one, so an
  // idle keep-alive connection costs its socket, its coroutine and this object, not a request's
  // headers and buffers (thousands of pooled client connections sit idle at once).
  void release_request();
  net::awaitable<void> serve_one();
  net::awaitable<void> discard_until_closed();
  net::awaitable<Status> write_buffers(std::span<const net::const_buffer> buffers);
  std::string format_head(int status, const HeaderMap& headers, std::optional<uint64_t> length,
                          bool chunked, std::string_view reason = {});
  Status map_read_error(const beast::error_code& ec) const;

  // Answers a request on the admin listener: /metrics and /healthcheck, 404 otherwise.
  net::awaitable<void> serve_admin();

  ServerImpl& server_;
  Worker& worker_;
  const bool admin_;  // a connection to the admin (metrics) listener
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::vector<std::string> masked_names_;  // field names the parser saw masked (read_head())
  // Reads the head only; framing_ finds the body.
  std::optional<bhttp::request_parser<bhttp::buffer_body>> parser_;
  Request request_;
  // The client's address (and remote_port_, set with it), asked of the socket once.
  const std::string& remote_addr();
  std::string remote_addr_;
  uint16_t remote_port_ = 0;
  bool remote_known_ = false;
  bool idle_ = false;
  bool waiting_ = false;  // in wait_for_request()
  std::chrono::steady_clock::time_point waiting_until_;  // when the idle sweep closes it
  bool finished_ = false;  // close_and_finish() ran

  // Per request:
  int status_ = 0;            // response status once started
  bool continue_sent_ = false;
  HeaderMap continue_headers_;  // sent with the first "100 Continue"
  bool body_done_ = false;
  BodyFraming framing_ = BodyFraming::none();  // where the request body's bytes are
  bool chunked_response_ = false;
  bool response_done_ = false;
  bool must_close_ = false;   // connection cannot be reused after this response
  bool body_after_head_ = false;  // read_body_after_head(): no "Connection: close" for it
  bool skip_unread_body_ = false;  // close_without_reading_body()
  bool unread_body_ = false;  // answered with the request body unread: linger before closing
  bool hold_head_ = false;    // hold_head_for_body(), until the next start_response()
  std::string held_head_;     // a started response's head, to go with the first body bytes
  // Frees it too: an idle keep-alive connection holds no response head.
  void drop_held_head() { std::string().swap(held_head_); }
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  std::optional<uint64_t> response_length_;  // declared Content-Length, for the access log
};

// ---- Session -----------------------------------------------------------------------------

net::awaitable<void> Session::run() {
  if (server_.metrics_) server_.metrics_->connection_opened();
  // A connection accepted before a drain began is served once even when it reaches its worker
  // after: its client sent a request to a server that was accepting.
  for (;;) {
    // A pipelined request already read needs no wait.
    if (buffer_.size() == 0 && !co_await wait_for_request()) break;
    HeadResult head = co_await read_request_head();
    if (head != HeadResult::kOk) break;
    co_await serve_one();
    if (must_close_ || !request_.keep_alive || worker_.draining) break;
    release_request();
  }
  if (unread_body_ && !worker_.draining) co_await discard_until_closed();
  close_and_finish();
}

// A client still sending a body that was answered without being read (an early refusal, as
// s3api's of a 100 MB DeleteObjects document) gets a reset instead of the answer when the
// socket closes with its data unread. So, as nginx's lingering close: our side shuts down,
// then what the client sends is read and dropped until it closes, for at most
// kLingerTotal, and kLingerIdle without a byte.
net::awaitable<void> Session::discard_until_closed() {
  constexpr auto kLingerTotal = std::chrono::seconds(30);
  constexpr auto kLingerIdle = std::chrono::seconds(5);
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  buffer_.clear();
  buffer_.shrink_to_fit();
  std::array<char, 16384> sink;
  const auto deadline = std::chrono::steady_clock::now() + kLingerTotal;
  idle_ = true;  // answered: a drain closes the connection at once (close_if_idle())
  for (;;) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    stream_.expires_after(std::min<std::chrono::steady_clock::duration>(left, kLingerIdle));
    auto [e, n] = co_await stream_.async_read_some(net::buffer(sink), kAsTuple);
    if (e) break;
  }
  idle_ = false;
}

net::awaitable<bool> Session::wait_for_request() {
  auto room = buffer_.prepare(beast::read_size(buffer_, 65536));
  if (worker_.idle_closed) {
    // Stopping: nothing waits any more, but a request already sent is served.
    const ssize_t n =
        ::recv(stream_.socket().native_handle(), room.data(), room.size(), MSG_DONTWAIT);
    if (n <= 0) co_return false;
    buffer_.commit(static_cast<size_t>(n));
    co_return true;
  }
  // The socket's own read, not the stream's: it tries the read at once as the stream's would
  // (no extra system call on a busy connection), but holds no timer while it waits.
  idle_ = true;
  waiting_ = true;
  waiting_until_ = std::chrono::steady_clock::now() + head_timeout();
  ++worker_.waiting;
  server_.arm_idle_sweep(worker_);
  auto [ec, n] = co_await stream_.socket().async_read_some(room, kAsTuple);
  --worker_.waiting;
  waiting_ = false;
  idle_ = false;
  if (ec) co_return false;  // closed by the client (eof), by the idle sweep, or by a drain
  buffer_.commit(n);
  co_return true;
}

void Session::close_and_finish() {
  if (finished_) return;
  finished_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
  if (server_.metrics_) server_.metrics_->connection_closed();
  server_.session_finished(worker_, this, admin_);
}

net::awaitable<Session::HeadResult> Session::read_request_head() {
  const auto& opt = server_.options_;
  parser_.emplace();
  // Beast limits the whole head; the per-line limits Swift has are checked in check_limits().
  parser_->header_limit(static_cast<uint32_t>(opt.max_request_line + opt.max_total_headers));
  parser_->body_limit(boost::none);  // handlers enforce max_file_size themselves
  // The whole head within head_timeout() of its first byte: a client trickling it (slowloris)
  // is cut as one that sends nothing is.
  stream_.expires_after(head_timeout());
  idle_ = true;
  beast::error_code ec = co_await internal::read_head(
      stream_, buffer_, *parser_, opt.max_request_line + opt.max_total_headers, masked_names_);
  idle_ = false;
  if (!ec) {
    if (auto refusal = check_limits()) {
      co_await reject(refusal->first, refusal->second);
      co_return HeadResult::kRejected;
    }
    fill_request();
    co_return HeadResult::kOk;
  }
  if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::bad_descriptor) {
    co_return HeadResult::kClosed;  // idle keep-alive close, slow client, or drain
  }
  if (ec == bhttp::error::header_limit) {
    // A request line that alone reaches the limit is Swift's 414; otherwise the head is too big.
    std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    auto eol = data.find("\r\n");
    if (eol == std::string_view::npos || eol + 2 >= opt.max_request_line) {
      co_await reject(414, "Request URI Too Long");
    } else {
      co_await reject(400, "Headers Too Large");
    }
    co_return HeadResult::kRejected;
  }
  if (ec == bhttp::error::bad_content_length) {
    co_await reject(400, "Bad Request");
    co_return HeadResult::kRejected;
  }
  if (ec == bhttp::error::partial_message) co_return HeadResult::kClosed;
  APUS_LOG_DEBUG("bad request head from " + remote_addr() + ": " + ec.message());
  co_await reject(400, "Bad Request");
  co_return HeadResult::kRejected;
}

std::optional<std::pair<int, std::string_view>> Session::check_limits() const {
  const auto& opt = server_.options_;
  const auto& msg = parser_->get();
  // "METHOD SP target SP HTTP/1.x CRLF", measured as eventlet measures its raw request line.
  size_t request_line = msg.method_string().size() + 1 + msg.target().size() + 1 + 8 + 2;
  if (request_line >= opt.max_request_line) {
    return std::pair(414, "Request URI Too Long");
  }
  size_t count = 0;
  for (const auto& field : msg) {
    ++count;
    // "Name: value CRLF"
    if (field.name_string().size() + 2 + field.value().size() + 2 >= opt.max_header_line) {
      return std::pair(400, "Header Line Too Long");
    }
  }
  if (count > opt.max_header_count) {
    return std::pair(431, "Request Header Fields Too Large");
  }
  return std::nullopt;
}

const std::string& Session::remote_addr() {
  if (!remote_known_) {  // once per connection: a getpeername() per request showed in strace
    beast::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      remote_addr_ = remote.address().to_string();
      remote_port_ = remote.port();
    }
    remote_known_ = true;
  }
  return remote_addr_;
}

void Session::release_request() {
  request_ = Request();
  continue_headers_ = HeaderMap();
  masked_names_ = std::vector<std::string>();
  parser_.reset();
  // Bytes of a pipelined request stay; an empty buffer goes, and the next read allocates one
  // of the size it needs.
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
}

void Session::fill_request() {
  const auto& msg = parser_->get();
  request_ = Request();
  request_.method.assign(msg.method_string());
  request_.target.assign(msg.target());
  request_.version = msg.version();
  request_.headers.reserve(16);
  // Names and repeats as Swift's WSGI layer presents them (X-Object-Meta-under_score arrives as
  // X-Object-Meta-Under-Score), so every server stores and compares what Swift does.
  bool underscore = false;
  for (const auto& field : msg) {
    std::string_view name = unmask_field_name(field.name_string(), masked_names_);
    add_wsgi_field(request_.headers, name, field.value());
    underscore = underscore || name.find('_') != std::string_view::npos;
  }
  if (underscore) {
    for (const auto& field : msg) {
      request_.raw_headers.emplace_back(unmask_field_name(field.name_string(), masked_names_),
                                        field.value());
    }
  }
  request_.chunked = parser_->chunked();
  if (auto len = parser_->content_length()) request_.content_length = *len;
  auto expect = request_.headers.get("Expect");
  request_.expect_continue = expect && iequals(*expect, "100-continue");
  request_.keep_alive = msg.keep_alive();
  request_.remote_addr = remote_addr();
  request_.remote_port = remote_port_;
  status_ = 0;
  continue_sent_ = false;
  body_after_head_ = false;
  skip_unread_body_ = false;
  hold_head_ = false;
  drop_held_head();
  continue_headers_.clear();
  // The parser read the head only; the body's bytes are read by read_framed_body().
  framing_ = internal::body_framing_of(*parser_);
  body_done_ = framing_.done();
  chunked_response_ = false;
  response_done_ = false;
  bytes_in_ = 0;
  bytes_out_ = 0;
  response_length_.reset();
}

net::awaitable<void> Session::reject(int status, std::string_view reason) {
  std::string response = canned_response(status, reason);
  std::array<net::const_buffer, 1> buffers{net::buffer(response)};
  (void)co_await write_buffers(buffers);
}

net::awaitable<void> Session::serve_one() {
  auto started = std::chrono::steady_clock::now();
  double start_time = now_unix();
  if (server_.metrics_) server_.metrics_->request_started();

  const auto& opt = server_.options_;
  std::string_view path = request_.path();
  if (admin_) {
    co_await serve_admin();
  } else if (opt.builtin_healthcheck && request_.method == "GET" && path == "/healthcheck") {
    Response r;
    r.headers.set("Content-Type", "text/plain");
    r.body = "OK";
    (void)co_await respond(std::move(r));
  } else {
    // A handler must not throw (house style); one that does has a bug, which is logged here
    // with its request while the client still gets its 500 (or, mid-response, a closed
    // connection) and the connection is not reused.
    std::exception_ptr failure;
    try {
      co_await server_.handler_(*this);
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) {
      APUS_LOG_ERROR("handler for " + request_.method + " " + escape_for_log(request_.target) +
                     " threw: " + describe_exception(failure));
      must_close_ = true;
    }
  }

  if (!response_started()) {
    // A handler that returned without answering: the client still gets an answer.
    APUS_LOG_ERROR("handler gave no response to " + request_.method + " " +
                   escape_for_log(request_.target));
    Response r;
    r.status = 500;
    must_close_ = true;
    (void)co_await respond(std::move(r));
  } else if (!response_done_) {
    must_close_ = true;  // a streamed response cut short: the client sees a short body
    if (!held_head_.empty()) {
      // Cut short before its first byte: the head still goes, as it would have at once.
      std::array<net::const_buffer, 1> buffers{net::buffer(held_head_)};
      (void)co_await write_buffers(buffers);
      drop_held_head();
    }
  }
  // A body the handler did not read would be taken for the next request; close instead (the
  // answer said so: format_head()), reading what the client still sends so that it gets the
  // answer (discard_until_closed). A client told no 100 Continue sends no body.
  if (!body_done_) {
    must_close_ = true;
    unread_body_ = response_done_ && !skip_unread_body_ &&
                   !(request_.expect_continue && !continue_sent_);
  }
  // Keep-alive connections wait with a small buffer: a thousand idle clients cost little.
  if (buffer_.size() == 0 && buffer_.capacity() > kIdleBufferBytes) buffer_.shrink_to_fit();

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int logged_status = response_done_ ? status_ : 499;
  if (server_.metrics_) {
    server_.metrics_->request_finished(request_.method, logged_status, seconds, bytes_in_,
                                       bytes_out_);
  }
  if (server_.access_logger_) {
    server_.access_logger_(
        RequestRecord{&request_, logged_status, response_length_, bytes_in_, bytes_out_, seconds,
                      start_time});
  }
}

net::awaitable<void> Session::serve_admin() {
  std::string_view path = request_.path();
  bool get = request_.method == "GET" || request_.method == "HEAD";
  Response r;
  if (get && path == "/metrics" && server_.metrics_) {
    r.headers.set("Content-Type", "text/plain; version=0.0.4");
    r.body = server_.metrics_->serialize();
  } else if (get && path == "/healthcheck") {
    r.headers.set("Content-Type", "text/plain");
    r.body = "OK";
  } else {
    r.status = 404;
  }
  (void)co_await respond(std::move(r));
}

Status Session::map_read_error(const beast::error_code& ec) const {
  if (ec == beast::error::timeout) return Status::timeout("client read timed out");
  if (ec == bhttp::error::bad_chunk && framing_.failed()) {
    return Status::invalid_argument(std::string("bad request body: ") + framing_.error());
  }
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == net::error::eof || ec == net::error::connection_reset ||
      ec == net::error::operation_aborted) {
    return Status::cancelled("client disconnected");
  }
  return Status::invalid_argument("bad request body: " + ec.message());
}

net::awaitable<Result<size_t>> Session::read_body(std::span<char> buf) {
  APUS_ASSERT(worker_.on_loop());
  if (body_done_) co_return size_t{0};
  if (request_.expect_continue && !continue_sent_) {
    Status s = co_await send_continue();
    if (!s.ok()) co_return s;
  }
  if (buf.empty()) co_return Status::invalid_argument("read_body needs a buffer");
  auto [ec, got] = co_await internal::read_framed_body(stream_, buffer_, framing_, buf, [this] {
    stream_.expires_after(to_duration(server_.options_.client_timeout));
  });
  if (ec) {
    must_close_ = true;
    co_return map_read_error(ec);
  }
  bytes_in_ += got;
  if (framing_.done()) body_done_ = true;
  co_return got;
}

net::awaitable<Status> Session::send_continue() {
  APUS_ASSERT(worker_.on_loop());
  if (!request_.expect_continue || continue_sent_ || status_ != 0) co_return Status();
  continue_sent_ = true;
  std::string head = "HTTP/1.1 100 Continue\r\n";
  for (const auto& [name, value] : continue_headers_) {
    if (!is_safe_header_text(name) || !is_safe_header_text(value)) {
      APUS_LOG_ERROR("dropping a 100 Continue header with CR, LF or NUL: " +
                     escape_for_log(name));
      continue;
    }
    head.append(name).append(": ").append(value).append("\r\n");
  }
  head.append("\r\n");
  continue_headers_.clear();
  std::array<net::const_buffer, 1> buffers{net::buffer(head.data(), head.size())};
  co_return co_await write_buffers(buffers);
}

std::string Session::format_head(int status, const HeaderMap& headers,
                                 std::optional<uint64_t> length, bool chunked,
                                 std::string_view reason) {
  // An answer given before the request body was all read ends the connection, and says so:
  // the rest of the body would be taken for the next request (a client that asked for
  // 100-continue and got a final answer may still send its body; eventlet closes those too).
  if (!body_done_ && !body_after_head_) must_close_ = true;
  if (worker_.draining) must_close_ = true;
  std::string head;
  head.reserve(256);
  head.append(request_.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  head.append(std::to_string(status)).append(" ");
  head.append(reason.empty() ? reason_phrase(status) : reason).append("\r\n");
  bool has_date = false;
  for (const auto& [name, value] : headers) {
    if (iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") ||
        iequals(name, "Connection")) {
      continue;  // framing belongs to the runtime
    }
    if (iequals(name, "Date")) has_date = true;
    head.append(name).append(": ").append(value).append("\r\n");
  }
  if (!has_date) head.append("Date: ").append(cached_date()).append("\r\n");
  response_length_ = chunked ? std::nullopt : length;
  if (chunked) {
    head.append("Transfer-Encoding: chunked\r\n");
  } else if (length) {
    head.append("Content-Length: ").append(std::to_string(*length)).append("\r\n");
  }
  bool closing = must_close_ || !request_.keep_alive;
  if (closing) {
    head.append("Connection: close\r\n");
  } else if (request_.version == 10 ||
             iequals(request_.headers.get_or("Connection", ""), "keep-alive")) {
    // HTTP/1.0 needs it; a 1.1 client that asked explicitly gets it echoed, as eventlet does.
    head.append("Connection: keep-alive\r\n");
  }
  head.append("\r\n");
  return head;
}

net::awaitable<Status> Session::refuse_unsafe_head(const std::string& what) {
  APUS_LOG_ERROR("refusing a response with CR, LF or NUL in its " + what + " to " +
                 request_.method + " " + escape_for_log(request_.target) + "; answering 500");
  status_ = 500;
  must_close_ = true;
  std::string head = format_head(500, HeaderMap(), 0, false);
  std::array<net::const_buffer, 1> buffers{net::buffer(head)};
  Status s = co_await write_buffers(buffers);
  if (s.ok()) response_done_ = true;
  co_return Status::invalid_argument("response head holds CR, LF or NUL: " + what);
}

net::awaitable<Status> Session::do_respond(Response response) {
  APUS_ASSERT(worker_.on_loop());
  if (status_ != 0) co_return Status::invalid_argument("response already started");
  if (auto bad = unsafe_head_field(response.headers, response.reason)) {
    co_return co_await refuse_unsafe_head(*bad);
  }
  status_ = response.status;
  std::optional<uint64_t> length = response.body.size();
  bool head_only = request_.method == "HEAD";
  if (auto declared = response.headers.get("Content-Length")) {
    // A HEAD answer declares the length of what a GET would send (its leading digits; a
    // value that starts with none, a sign included, is not a length).
    uint64_t v = 0;
    if (head_only &&
        std::from_chars(declared->data(), declared->data() + declared->size(), v).ec == std::errc())
      length = v;
  }
  std::string head =
      format_head(response.status, response.headers, length, false, response.reason);
  std::array<net::const_buffer, 2> buffers{net::buffer(head), net::buffer(response.body)};
  size_t count = head_only || response.body.empty() ? 1 : 2;
  Status s = co_await write_buffers(std::span(buffers.data(), count));
  if (s.ok()) {
    response_done_ = true;
    if (!head_only) bytes_out_ += response.body.size();
  }
  co_return s;
}

net::awaitable<Status> Session::do_start_response(int status, HeaderMap headers,
                                                  std::optional<uint64_t> length) {
  APUS_ASSERT(worker_.on_loop());
  if (status_ != 0) co_return Status::invalid_argument("response already started");
  if (auto bad = unsafe_head_field(headers, {})) co_return co_await refuse_unsafe_head(*bad);
  status_ = status;
  bool head_only = request_.method == "HEAD";
  // HTTP/1.0 clients cannot read chunked bodies: they get a body ended by the close.
  chunked_response_ = !length && !head_only && request_.version == 11;
  if (!length && !chunked_response_) must_close_ = true;
  std::string head = format_head(status, headers, length, chunked_response_);
  const bool has_body = !head_only && (chunked_response_ || !length || *length > 0);
  const bool hold = std::exchange(hold_head_, false);
  if (hold && has_body && !body_after_head_) {
    held_head_ = std::move(head);  // goes with the first chunk, or finish_response()
    co_return Status();
  }
  std::array<net::const_buffer, 1> buffers{net::buffer(head)};
  Status s = co_await write_buffers(buffers);
  if (s.ok() && head_only) response_done_ = true;
  co_return s;
}

net::awaitable<Status> Session::write_body(std::string_view chunk) {
  APUS_ASSERT(worker_.on_loop());
  if (status_ == 0 || response_done_) co_return Status::invalid_argument("no open response");
  if (chunk.empty()) co_return Status();
  // A held head goes first, in the same write.
  std::array<net::const_buffer, 4> buffers;
  size_t count = 0;
  if (!held_head_.empty()) buffers[count++] = net::buffer(held_head_);
  char size_line[24];
  if (chunked_response_) {
    int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    buffers[count++] = net::buffer(size_line, n);
  }
  buffers[count++] = net::buffer(chunk);
  if (chunked_response_) buffers[count++] = net::buffer("\r\n", 2);
  Status s = co_await write_buffers(std::span(buffers.data(), count));
  drop_held_head();
  if (s.ok()) bytes_out_ += chunk.size();
  co_return s;
}

net::awaitable<Status> Session::finish_response() {
  APUS_ASSERT(worker_.on_loop());
  if (status_ == 0) co_return Status::invalid_argument("no response started");
  if (response_done_) co_return Status();
  std::array<net::const_buffer, 2> buffers;
  size_t count = 0;
  if (!held_head_.empty()) buffers[count++] = net::buffer(held_head_);
  if (chunked_response_) {
    static constexpr std::string_view kLastChunk = "0\r\n\r\n";
    buffers[count++] = net::buffer(kLastChunk.data(), kLastChunk.size());
  }
  if (count > 0) {
    Status s = co_await write_buffers(std::span(buffers.data(), count));
    drop_held_head();
    if (!s.ok()) co_return s;
  }
  response_done_ = true;
  co_return Status();
}

net::awaitable<Status> Session::write_buffers(std::span<const net::const_buffer> buffers) {
  stream_.expires_after(to_duration(server_.options_.client_timeout));
  auto [ec, n] = co_await net::async_write(stream_, buffers, kAsTuple);
  if (ec) {
    must_close_ = true;
    if (ec == beast::error::timeout) co_return Status::timeout("client write timed out");
    co_return Status::cancelled("client disconnected: " + ec.message());
  }
  co_return Status();
}

// ---- ServerImpl ------------------------------------------------------------------------

namespace {

// Raises the soft RLIMIT_NOFILE to kWantedOpenFiles, as swift-init does for Swift's servers, so
// max_clients connections per worker (and the disk files they open) fit. As root the hard limit
// rises too; otherwise the soft one goes as high as the hard one allows. Never lowers a limit.
void raise_open_files_limit() {
  static std::atomic<bool> done{false};  // once per process, however many servers it runs
  if (done.exchange(true)) return;
  rlimit now{};
  if (::getrlimit(RLIMIT_NOFILE, &now) != 0 || now.rlim_cur == RLIM_INFINITY ||
      now.rlim_cur >= kWantedOpenFiles) {
    return;
  }
  rlimit want{kWantedOpenFiles,
              now.rlim_max == RLIM_INFINITY ? now.rlim_max
                                            : std::max<rlim_t>(now.rlim_max, kWantedOpenFiles)};
  if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return;
  rlimit most{now.rlim_max, now.rlim_max};
  if (::setrlimit(RLIMIT_NOFILE, &most) == 0) now.rlim_cur = now.rlim_max;
  APUS_LOG_WARNING("cannot raise the open files limit (RLIMIT_NOFILE) to " +
                   std::to_string(kWantedOpenFiles) + "; it is " + std::to_string(now.rlim_cur));
}

bool is_out_of_fds(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

}  // namespace

Status ServerImpl::bind_and_listen(const std::string& ip, uint16_t port, ListenSocket& out) {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    addr_len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    addr_len = sizeof(sockaddr_in6);
  } else {
    return Status::invalid_argument("not an IP address: " + ip);
  }
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::io_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (options_.reuse_port && !out.admin) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 ||
      ::listen(fd, options_.backlog) != 0) {
    int err = errno;
    ::close(fd);
    return Status::io_error("cannot listen on " + ip + ":" + std::to_string(port) + ": " +
                            std::strerror(err));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  out.port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                     : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  out.fd = fd;
  return Status();
}

bool ServerImpl::adopt_inherited(std::string_view name, const std::string& ip, uint16_t port,
                                 ListenSocket& out) {
  std::optional<int> fd = take_inherited_socket(name);
  if (!fd) return false;
  // The predecessor's socket serves only when it is bound where this config says: a changed
  // bind_ip or bind_port binds afresh.
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  int listening = 0;
  socklen_t flag_len = sizeof listening;
  bool same = ::getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0 &&
              ::getsockopt(*fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &flag_len) == 0 &&
              listening;
  uint16_t bound_port = 0;
  if (same && bound.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&bound);
    in_addr want{};
    same = inet_pton(AF_INET, ip.c_str(), &want) == 1 && want.s_addr == v4->sin_addr.s_addr;
    bound_port = ntohs(v4->sin_port);
  } else if (same && bound.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&bound);
    in6_addr want{};
    same = inet_pton(AF_INET6, ip.c_str(), &want) == 1 &&
           std::memcmp(&want, &v6->sin6_addr, sizeof want) == 0;
    bound_port = ntohs(v6->sin6_port);
  } else {
    same = false;
  }
  if (!same || (port != 0 && port != bound_port)) {
    ::close(*fd);
    return false;
  }
  ::fcntl(*fd, F_SETFL, ::fcntl(*fd, F_GETFL) | O_NONBLOCK);
  out.fd = *fd;
  out.port = bound_port;
  APUS_LOG_INFO("serving on " + ip + ":" + std::to_string(bound_port) +
                ", the socket the previous process handed over");
  return true;
}

bool ServerImpl::hand_over() {
  if (!running_) return false;
  auto successor = start_successor({{"LISTEN", public_.fd}, {"ADMIN_LISTEN", admin_.fd}},
                                   kSuccessorStartSeconds);
  if (!successor.ok()) {
    APUS_LOG_ERROR("reload failed, this process goes on serving: " +
                   successor.status().message());
    return false;
  }
  handed_over_ = true;
  APUS_LOG_INFO("reload: process " + std::to_string(*successor) +
                " serves now; this one finishes its requests and exits");
  return true;
}

Status ServerImpl::start() {
  if (running_) return Status::invalid_argument("server already started");
  if (options_.workers < 1) options_.workers = 1;
  raise_open_files_limit();
  public_.limit = options_.max_clients > 0
                      ? static_cast<size_t>(options_.max_clients) *
                            static_cast<size_t>(options_.workers)
                      : SIZE_MAX;
  if (!adopt_inherited("LISTEN", options_.bind_ip, options_.bind_port, public_)) {
    APUS_RETURN_IF_ERROR(bind_and_listen(options_.bind_ip, options_.bind_port, public_));
  }
  if (options_.metrics_bind_port) {
    admin_.admin = true;
    admin_.limit = kMaxAdminConnections;
    Status s = adopt_inherited("ADMIN_LISTEN", options_.metrics_bind_ip,
                               *options_.metrics_bind_port, admin_)
                   ? Status()
                   : bind_and_listen(options_.metrics_bind_ip, *options_.metrics_bind_port,
                                     admin_);
    if (!s.ok()) {
      ::close(public_.fd);
      public_.fd = -1;
      return Status::io_error("metrics listener: " + s.message());
    }
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (int i = 0; i < options_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    Worker* w = worker.get();
    // A socket object makes Asio create the worker's reactor (epoll, eventfd and timerfd) now;
    // created lazily at the first connection, it could fail with EMFILE and kill the worker.
    { tcp::socket reactor_warmup(w->ioc); }
    w->thread = std::thread([this, w] {
      try {
        w->ioc.run();
      } catch (const std::exception& e) {
        // Handlers must not throw; one that does has broken an invariant.
        APUS_LOG_ERROR(std::string("worker died: ") + e.what());
        std::abort();
      }
      MutexLock lock(&drain_mutex_);
      ++workers_finished_;
      drained_.signal_all();
    });
    workers_.push_back(std::move(worker));
  }
  if (metrics_) {
    auto depth = metrics_->gauge("apus_accept_queue_depth",
                                 "Accepted connections not yet taken by a worker", {});
    metrics_->add_collect_hook([this, depth] { depth.set(accepted_.size_approx()); });
  }
  acceptor_ = std::thread([this] { accept_loop(); });
  running_ = true;
  tell_parent_ready();  // a reload's successor: the predecessor may stop accepting now
  tell_service_manager_ready();
  return Status();
}

Worker& ServerImpl::least_busy_worker() {
  Worker* best = workers_.front().get();
  for (auto& w : workers_) {
    if (w->connections.load(std::memory_order_relaxed) <
        best->connections.load(std::memory_order_relaxed)) {
      best = w.get();
    }
  }
  return *best;
}

void ServerImpl::accept_loop() {
  // The acceptor sleeps in poll() until a connection or stop() arrives: no timers, no polling.
  // A listener at its connection limit leaves the poll set, so its new connections wait in the
  // kernel backlog; a closing connection wakes the acceptor through wake_fd_. After EMFILE every
  // listener leaves the set for kAcceptBackoffMs (a pending connection would otherwise make
  // poll() return at once, forever: the old 100% CPU spin).
  bool backing_off = false;
  for (;;) {
    pollfd fds[4] = {{stop_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {-1, 0, 0}, {-1, 0, 0}};
    bool waiting_for_room = backing_off;
    if (!backing_off) {
      for (auto [i, ls] : {std::pair{2, &public_}, std::pair{3, &admin_}}) {
        if (ls->fd < 0) continue;
        // wake_wanted_ first, then the count: a session closing in between either sees the
        // flag (and writes wake_fd_) or has already made room we see here.
        if (!has_room(*ls)) {
          wake_wanted_.store(true, std::memory_order_seq_cst);
          if (!has_room(*ls)) {
            waiting_for_room = true;
            continue;
          }
        }
        fds[i] = {ls->fd, POLLIN, 0};
      }
    }
    if (backing_off) wake_wanted_.store(true, std::memory_order_seq_cst);
    int rc = ::poll(fds, 4, backing_off ? kAcceptBackoffMs : -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      APUS_LOG_ERROR(std::string("accept poll failed: ") + std::strerror(errno));
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    if (waiting_for_room) wake_wanted_.store(false, std::memory_order_seq_cst);
    backing_off = false;
    if (fds[2].revents) accept_pending(public_, &backing_off);
    if (fds[3].revents && !backing_off) accept_pending(admin_, &backing_off);
  }
}

void ServerImpl::accept_pending(ListenSocket& ls, bool* out_of_fds) {
  while (has_room(ls)) {
    int fd = ::accept4(ls.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (is_out_of_fds(err)) {
        // Linux fails accept() for want of a descriptor even with nothing to accept, so the
        // last descriptor taken makes the next (empty) accept fail too: only a connection
        // actually waiting makes this an episode.
        pollfd pending{ls.fd, POLLIN, 0};
        if (::poll(&pending, 1, 0) <= 0) return;
        *out_of_fds = true;
        ++episode_failures_;
        if (!out_of_fds_episode_) {
          out_of_fds_episode_ = true;
          episode_start_ = std::chrono::steady_clock::now();
          APUS_LOG_ERROR(std::string("accept failed: ") + std::strerror(err) +
                         "; not accepting for " + std::to_string(kAcceptBackoffMs) +
                         " ms at a time until a descriptor frees up (" +
                         std::to_string(ls.open.load()) + " connections open)");
        }
        return;
      }
      APUS_LOG_WARNING(std::string("accept failed: ") + std::strerror(err));
      return;
    }
    if (out_of_fds_episode_) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - episode_start_)
                    .count();
      APUS_LOG_WARNING("accepting again after " + std::to_string(ms) + " ms out of descriptors (" +
                       std::to_string(episode_failures_) + " failed accepts)");
      out_of_fds_episode_ = false;
      episode_failures_ = 0;
    }
    ls.open.fetch_add(1, std::memory_order_seq_cst);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    accepted_.enqueue(Accepted{fd, ls.admin});
    // One wake-up per connection: the woken worker takes one connection off the queue.
    Worker& worker = least_busy_worker();
    worker.connections.fetch_add(1, std::memory_order_relaxed);
    net::post(worker.ioc, [this, &worker] { take_connection(worker); });
  }
}

void ServerImpl::take_connection(Worker& worker) {
  APUS_ASSERT(worker.on_loop());
  Accepted conn;
  if (!accepted_.try_dequeue(conn)) {
    // The queue is not linearizable: with another worker dequeuing at the same moment,
    // try_dequeue can miss the connection this wake-up stands for, which would then wait for
    // the next accept (the last connection of a burst, forever). Look again once the others
    // had their turn; give up only when the queue is empty.
    if (accepted_.size_approx() > 0) {
      net::post(worker.ioc, [this, &worker] { take_connection(worker); });
      return;
    }
    worker.connections.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  auto drop = [&] {
    ::close(conn.fd);
    worker.connections.fetch_sub(1, std::memory_order_relaxed);
    connection_closed(conn.admin);
  };
  if (worker.draining) {
    drop();
    return;
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  ::getsockname(conn.fd, reinterpret_cast<sockaddr*>(&peer), &len);
  tcp protocol = peer.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
  beast::error_code ec;
  tcp::socket socket(worker.ioc);
  socket.assign(protocol, conn.fd, ec);
  if (ec) {
    drop();
    return;
  }
  open_connections_.fetch_add(1, std::memory_order_relaxed);
  auto session = std::make_shared<Session>(*this, worker, std::move(socket), conn.admin);
  worker.sessions.insert(session.get());
  // The completion owns the session until run() ends. Should an exception end it early, the
  // connection is closed and the session unregistered all the same (no dangling Session* in
  // worker.sessions for stop() to touch).
  auto task = session->run();
  common::spawn_logged(worker.ioc.get_executor(), std::move(task), "http session",
                       [session] { session->close_and_finish(); });
}

void ServerImpl::connection_closed(bool admin) {
  (admin ? admin_ : public_).open.fetch_sub(1, std::memory_order_seq_cst);
  if (wake_wanted_.load(std::memory_order_seq_cst) &&
      wake_wanted_.exchange(false, std::memory_order_seq_cst)) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
}

void ServerImpl::session_finished(Worker& worker, Session* session, bool admin) {
  APUS_ASSERT(worker.on_loop());
  worker.sessions.erase(session);
  worker.connections.fetch_sub(1, std::memory_order_relaxed);
  connection_closed(admin);
  if (open_connections_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    MutexLock lock(&drain_mutex_);
    drained_.signal_all();
  }
}

void ServerImpl::close_idle_sessions(Worker& worker) {
  APUS_ASSERT(worker.on_loop());
  worker.draining = true;
  worker.idle_closed = true;
  for (Session* s : worker.sessions) s->close_if_idle();
  worker.idle_sweep.cancel();  // nothing waits any more: the worker may finish at once
}

void ServerImpl::arm_idle_sweep(Worker& worker) {
  APUS_ASSERT(worker.on_loop());
  if (worker.idle_sweep_armed || worker.idle_closed) return;
  worker.idle_sweep_armed = true;
  const auto cadence = std::clamp<std::chrono::steady_clock::duration>(
      to_duration(options_.client_timeout / 4), std::chrono::milliseconds(10),
      std::chrono::seconds(1));
  worker.idle_sweep.expires_after(cadence);
  worker.idle_sweep.async_wait([this, &worker](const beast::error_code& ec) {
    worker.idle_sweep_armed = false;
    if (ec || worker.idle_closed) return;
    sweep_idle(worker);
    if (worker.waiting > 0) arm_idle_sweep(worker);
  });
}

void ServerImpl::sweep_idle(Worker& worker) {
  const auto now = std::chrono::steady_clock::now();
  for (Session* s : worker.sessions) s->close_if_waited_out(now);
}

void ServerImpl::stop() {
  if (!running_) return;
  running_ = false;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);
  acceptor_.join();
  for (ListenSocket* ls : {&public_, &admin_}) {
    if (ls->fd >= 0) ::close(ls->fd);
    ls->fd = -1;
  }

  auto deadline = std::chrono::steady_clock::now() + to_duration(options_.drain_timeout);
  if (handed_over_) {
    // After a reload, keep-alive connections get kReloadIdleGrace to send their next request,
    // which is answered with "Connection: close": a client (or HAProxy) that sends on a
    // connection just as it closes sees no answer, and must not retry a PUT. Under load every
    // connection moves to the successor this way; only ones idle for the whole grace are cut.
    for (auto& w : workers_) {
      Worker* worker = w.get();
      net::post(worker->ioc, [worker] { worker->draining = true; });
    }
    MutexLock lock(&drain_mutex_);
    drained_.wait_until(&drain_mutex_,
                        std::min(deadline, std::chrono::steady_clock::now() + kReloadIdleGrace),
                        [this] { return open_connections_.load() == 0; });
  }
  for (auto& w : workers_) {
    Worker* worker = w.get();
    net::post(worker->ioc, [this, worker] { close_idle_sessions(*worker); });
  }
  {
    MutexLock lock(&drain_mutex_);
    drained_.wait_until(&drain_mutex_, deadline,
                        [this] { return open_connections_.load() == 0; });
  }
  // Let each worker's run() return on its own once its remaining work is done; only a worker
  // still busy at the deadline is stopped by force.
  for (auto& w : workers_) {
    Worker* worker = w.get();
    net::post(worker->ioc, [worker] { worker->keep_running.reset(); });
  }
  bool finished;
  {
    MutexLock lock(&drain_mutex_);
    finished = drained_.wait_until(&drain_mutex_, deadline, [this] {
      drain_mutex_.assert_held();  // the predicate runs with it held; the analysis cannot see it
      return workers_finished_ == static_cast<int>(workers_.size());
    });
  }
  if (!finished) {
    APUS_LOG_WARNING("drain_timeout reached with requests in flight; stopping them");
    for (auto& w : workers_) w->ioc.stop();
  }
  for (auto& w : workers_) w->thread.join();
  workers_.clear();  // destroys the io_contexts and any session still open after the drain
  Accepted conn;
  while (accepted_.try_dequeue(conn)) ::close(conn.fd);
  for (int* fd : {&stop_fd_, &wake_fd_}) {
    ::close(*fd);
    *fd = -1;
  }
}

// ---- read_body_at_most -----------------------------------------------------------------

net::awaitable<WholeBody> read_body_at_most(Exchange& ex, size_t max) {
  WholeBody out;
  const auto& length = ex.request().content_length;
  if (length && *length > max) {
    out.outcome = WholeBody::Outcome::kTooLarge;
    co_return out;
  }
  // Read into the string's own tail (read_body() puts the bytes there without a copy), in
  // pieces that grow with the body (each is zeroed first) up to 64 KiB, never past the
  // announced length and one byte: that byte, or one past the room, tells a body that is too
  // long from one that just fits.
  if (length) out.bytes.reserve(static_cast<size_t>(*length) + 1);
  for (;;) {
    const size_t have = out.bytes.size();
    const size_t room = max - have;
    size_t want = std::min(std::clamp<size_t>(have, 4 << 10, 64 << 10), room + 1);
    if (length && *length >= have) want = std::min<uint64_t>(want, *length - have + 1);
    out.bytes.resize(have + want);
    auto n = co_await ex.read_body(std::span<char>(out.bytes.data() + have, want));
    out.bytes.resize(have + (n.ok() ? *n : 0));
    if (!n.ok()) {
      out.outcome = WholeBody::Outcome::kFailed;
      out.failure = n.status();
      out.bytes.clear();
      co_return out;
    }
    if (*n == 0) co_return out;
    if (*n > room) {
      out.outcome = WholeBody::Outcome::kTooLarge;
      out.bytes.clear();
      co_return out;
    }
  }
}

// ---- Server ------------------------------------------------------------------------------

Server::Server(ServerOptions options, Handler handler, Metrics* metrics,
               AccessLogger access_logger)
    : impl_(std::make_unique<ServerImpl>(std::move(options), std::move(handler), metrics,
                                   std::move(access_logger))) {}

Server::~Server() { stop(); }

Status Server::start() { return impl_->start(); }
uint16_t Server::port() const { return impl_->public_.port; }
uint16_t Server::metrics_port() const { return impl_->admin_.port; }
void Server::stop() { impl_->stop(); }
size_t Server::accept_queue_depth() const { return impl_->accepted_.size_approx(); }
size_t Server::open_connections() const { return impl_->open_connections_.load(); }

void Server::run_until_signal(const std::function<void()>& on_pass_request) {
  wait_for_stop_signal(on_pass_request, [this] { return impl_->hand_over(); });
  stop();
}

}  // namespace apus::common::http
