// Subrequests (subrequest.h). A streamed subrequest runs in a coroutine of its own, spawned on
// the caller's executor, writing into a StreamExchange; the caller reads from the queue that
// exchange fills. The two coroutines wake each other by cancelling each other's timer (each
// timer is set only by the coroutine waiting on it, see DEVELOPING.md).
#include "proxy/subrequest.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <cstring>
#include <deque>

#include "common/async.h"
#include "common/http/swob.h"
#include "common/http/url.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);

// Waits until another coroutine cancels `t` (the only way it ends).
net::awaitable<void> wait_woken(net::steady_timer& t) {
  t.expires_at(net::steady_timer::time_point::max());
  auto [ec] = co_await t.async_wait(kTuple);
  (void)ec;
}

// The Content-Length header's value, or `fallback` when there is none or it is not a number.
std::optional<uint64_t> body_length(const HeaderMap& h, std::optional<uint64_t> fallback) {
  auto v = h.get("Content-Length");
  if (!v) return fallback;
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size()) return fallback;
  return n;
}

// Whether an answer with `status` to `method` has no body whatever its headers say.
bool bodiless(std::string_view method, int status) {
  return method == "HEAD" || status < 200 || status == 204 || status == 304;
}

}  // namespace

// What the running request and its reader share. Everything is touched on the one executor.
struct Subrequest::State {
  // The request side: an Exchange whose answer goes into the State.
  class StreamExchange final : public Exchange {
   public:
    StreamExchange(State& s, Request req) : s_(s), req_(std::move(req)) {}
    const Request& request() const override { return req_; }
    net::awaitable<Result<size_t>> read_body(std::span<char>) override { co_return size_t{0}; }
    net::awaitable<Status> send_continue() override { co_return Status(); }
    net::awaitable<Status> write_body(std::string_view chunk) override {
      return s_.push(chunk);
    }
    net::awaitable<Status> finish_response() override {
      s_.finished = true;
      s_.wake_caller.cancel();
      co_return Status();
    }
    bool response_started() const override { return s_.status != 0; }
    int response_status() const override { return s_.status; }

   protected:
    net::awaitable<Status> do_respond(Response r) override {
      s_.set_head(r.status, std::move(r.headers), r.body.size());
      Status st = co_await s_.push(r.body);
      s_.finished = true;
      s_.wake_caller.cancel();
      co_return st;
    }
    net::awaitable<Status> do_start_response(int st, HeaderMap h,
                                             std::optional<uint64_t> len) override {
      s_.set_head(st, std::move(h), len);
      co_return Status();
    }

   private:
    State& s_;
    Request req_;
  };

  // A piece of body not read yet: a copy (read-ahead), or the writer's own chunk, which stays
  // valid while its write_body() waits for the reader (no read-ahead).
  struct Piece {
    std::string copy;
    std::string_view borrowed;
    bool copied = false;
    size_t pos = 0;
    std::string_view rest() const {
      return (copied ? std::string_view(copy) : borrowed).substr(pos);
    }
  };

  State(const net::any_io_executor& ex, Next app_in, Request req, ProxyEnv env_in,
        size_t read_ahead_in)
      : app(std::move(app_in)),
        env(std::move(env_in)),
        read_ahead(read_ahead_in),
        exchange(*this, std::move(req)),
        wake_caller(ex),
        wake_app(ex) {}

  // Request side: queues `chunk` and waits until at most read_ahead bytes are left unread.
  net::awaitable<Status> push(std::string_view chunk) {
    if (cancelled) co_return Status::cancelled("subrequest reader gone");
    if (chunk.empty() || no_body) co_return Status();
    if (length && received + chunk.size() > *length) {
      failed = true;
      wake_caller.cancel();
      co_return Status::io_error("subrequest body beyond its length");
    }
    received += chunk.size();
    buffered += chunk.size();
    Piece p;
    if (read_ahead > 0) {
      p.copy.assign(chunk);
      p.copied = true;
    } else {
      p.borrowed = chunk;
    }
    queue.push_back(std::move(p));
    wake_caller.cancel();
    while (buffered > read_ahead && !cancelled) co_await wait_woken(wake_app);
    co_return cancelled ? Status::cancelled("subrequest reader gone") : Status();
  }

  void set_head(int st, HeaderMap h, std::optional<uint64_t> len) {
    status = st;
    length = body_length(h, len);
    headers = std::move(h);
    no_body = bodiless(exchange.request().method, st);
    wake_caller.cancel();
  }

  // Request side, once `app` returned (or threw): a 500 head if there was none.
  void end() {
    if (status == 0) {
      status = 500;
      no_body = true;
      finished = true;
    }
    ended = true;
    wake_caller.cancel();
  }

  // Reader side: drops what is left and lets a waiting writer fail.
  void abandon() {
    cancelled = true;
    queue.clear();
    buffered = 0;
    wake_app.cancel();
  }

  Next app;
  ProxyEnv env;
  const size_t read_ahead;
  StreamExchange exchange;
  // The head; status 0 until it is in.
  int status = 0;
  HeaderMap headers;
  std::optional<uint64_t> length;
  bool no_body = false;
  // The body: unread pieces, their size in bytes, and the bytes written in all.
  std::deque<Piece> queue;
  size_t buffered = 0;
  uint64_t received = 0;
  bool finished = false;   // the answer is complete (respond() or finish_response())
  bool failed = false;     // the request wrote beyond the length
  bool ended = false;      // app returned
  bool cancelled = false;  // the reader abandoned the rest
  net::steady_timer wake_caller;  // waited on by the reader (start, read, close)
  net::steady_timer wake_app;     // waited on by the request's write_body
};

namespace {

net::awaitable<std::unique_ptr<Subrequest>> start_subrequest(Next app, Request req, ProxyEnv env,
                                                             size_t read_ahead) {
  auto executor = co_await net::this_coro::executor;
  std::string what = "subrequest " + req.method + " " + req.target;
  auto state = std::make_shared<Subrequest::State>(executor, std::move(app), std::move(req),
                                                   std::move(env), read_ahead);
  common::spawn_logged(
      executor,
      [state]() -> net::awaitable<void> {
        co_await state->app(state->exchange, state->env);
        state->end();
      },
      std::move(what), [state] { state->end(); });
  while (state->status == 0) co_await wait_woken(state->wake_caller);
  co_return std::make_unique<Subrequest>(std::move(state));
}

}  // namespace

net::awaitable<std::unique_ptr<Subrequest>> Subrequest::start(const Next& app, Request req,
                                                              ProxyEnv env, size_t read_ahead) {
  return start_subrequest(app, std::move(req), std::move(env), read_ahead);
}

Subrequest::Subrequest(std::shared_ptr<State> state) : state_(std::move(state)) {}

Subrequest::~Subrequest() {
  // Not closed: the request may still be writing. It fails its next write and ends on its own,
  // its coroutine holding the State until then.
  if (!state_->ended) state_->abandon();
}

int Subrequest::status() const { return state_->status; }
const HeaderMap& Subrequest::headers() const { return state_->headers; }
std::optional<uint64_t> Subrequest::length() const { return state_->length; }
size_t Subrequest::buffered() const { return state_->buffered; }

net::awaitable<Result<size_t>> Subrequest::read(std::span<char> buf) {
  State& s = *state_;
  for (;;) {
    if (s.cancelled) co_return Status::cancelled("subrequest closed");
    if (!s.queue.empty()) {
      State::Piece& p = s.queue.front();
      std::string_view rest = p.rest();
      size_t n = std::min(buf.size(), rest.size());
      std::memcpy(buf.data(), rest.data(), n);
      p.pos += n;
      if (p.pos == (p.copied ? p.copy.size() : p.borrowed.size())) s.queue.pop_front();
      s.buffered -= n;
      if (s.buffered <= s.read_ahead) s.wake_app.cancel();
      co_return n;
    }
    if (s.failed) co_return Status::io_error("subrequest body beyond its length");
    if (s.finished || s.ended) break;
    co_await wait_woken(s.wake_caller);
  }
  if (s.no_body) co_return size_t{0};
  if (!s.finished) co_return Status::io_error("subrequest ended mid-body");
  if (s.length && s.received != *s.length) {
    co_return Status::io_error("subrequest body ended short: " + std::to_string(s.received) +
                               " of " + std::to_string(*s.length) + " bytes");
  }
  co_return size_t{0};
}

net::awaitable<Result<std::string>> Subrequest::read_all(size_t max_bytes) {
  std::string out;
  std::array<char, 16384> buf;
  for (;;) {
    auto n = co_await read(buf);
    if (!n.ok()) co_return n.status();
    if (*n == 0) co_return out;
    if (out.size() + *n > max_bytes) {
      co_return Status::invalid_argument("subrequest body over " + std::to_string(max_bytes) +
                                         " bytes");
    }
    out.append(buf.data(), *n);
  }
}

net::awaitable<void> Subrequest::close() {
  State& s = *state_;
  if (!s.ended) s.abandon();
  while (!s.ended) co_await wait_woken(s.wake_caller);
}

net::awaitable<Result<size_t>> SubrequestBody::read(std::span<char> buf) {
  return from_.read(buf);
}

ProxyEnv subrequest_env(const ProxyEnv& env, std::string source) {
  ProxyEnv sub;
  sub.trans_id = env.trans_id;
  sub.start_time = env.start_time;
  sub.authorize = env.authorize;
  sub.authorize_override = env.authorize_override;
  sub.remote_user = env.remote_user;
  sub.clean_acl = env.clean_acl;
  sub.memcache = env.memcache;
  sub.info_memo = env.info_memo;
  sub.log_info = env.log_info;
  sub.sse_customer_key = env.sse_customer_key;
  sub.sse_refusal = env.sse_refusal;
  sub.source = std::move(source);
  return sub;
}

void carry_write(const ProxyEnv& from, ProxyEnv& to) {
  to.sse_write_kms_key_id = from.sse_write_kms_key_id;
  to.sse_write_customer_key = from.sse_write_customer_key;
  to.update_footers = from.update_footers;
}

namespace {
net::awaitable<std::optional<Response>> allow_all(const Request&, ProxyEnv&) {
  co_return std::nullopt;
}
}  // namespace

ProxyEnv pre_authed_env(const ProxyEnv& env, std::string source) {
  ProxyEnv sub = subrequest_env(env, std::move(source));
  sub.authorize = allow_all;
  sub.authorize_override = true;
  sub.remote_user = ".wsgi.pre_authed";
  return sub;
}

HeaderMap pre_authed_headers(const Request& client) {
  HeaderMap h = subrequest_headers(client, "Swift", false);
  h.erase("X-Auth-Token");
  return h;
}

HeaderMap subrequest_headers(const Request& client, std::string_view agent,
                             bool after_client_agent) {
  HeaderMap h;
  for (std::string_view name : {"Host", "Origin", "Access-Control-Request-Method", "X-User-Id",
                                "X-Project-Id", "Referer", "X-Auth-Token"}) {
    if (auto v = client.headers.get(name)) h.set(name, *v);
  }
  std::string ua;
  if (after_client_agent) {
    ua = client.headers.get_or("User-Agent", "");
    ua += " ";
  }
  ua += agent;
  const size_t first = ua.find_first_not_of(" \t");
  const size_t last = ua.find_last_not_of(" \t");
  h.set("User-Agent", first == std::string::npos ? "" : ua.substr(first, last - first + 1));
  return h;
}

Request make_subrequest(std::string method, std::string_view path, std::string_view query,
                        HeaderMap headers) {
  Request r;
  r.method = std::move(method);
  r.target = common::http::quote(path);
  if (!query.empty()) {
    r.target += '?';
    r.target += query;
  }
  r.headers = std::move(headers);
  r.content_length = 0;
  return r;
}

namespace {

// Collects a whole answer, at most max_body bytes of body; the request body comes from `body`.
class CollectingExchange final : public Exchange {
 public:
  CollectingExchange(Request req, BodySource* body, size_t max_body)
      : req_(std::move(req)), body_(body), max_body_(max_body) {}

  const Request& request() const override { return req_; }
  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    if (body_ == nullptr) co_return size_t{0};
    co_return co_await body_->read(buf);
  }
  net::awaitable<Status> send_continue() override { co_return Status(); }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    co_return append(chunk);
  }
  net::awaitable<Status> finish_response() override {
    finished_ = true;
    co_return Status();
  }
  bool response_started() const override { return r_.status != 0; }
  int response_status() const override { return r_.status; }

  // The answer, once app returned.
  Result<Response> result() && {
    if (r_.status == 0) return common::http::swob_response(500);
    if (over_) {
      return Status::invalid_argument("subrequest body over " + std::to_string(max_body_) +
                                      " bytes");
    }
    if (bodiless(req_.method, r_.status)) return std::move(r_);
    if (!finished_) return Status::io_error("subrequest ended mid-body");
    if (length_ && r_.body.size() != *length_) {
      return Status::io_error("subrequest body ended short: " + std::to_string(r_.body.size()) +
                              " of " + std::to_string(*length_) + " bytes");
    }
    return std::move(r_);
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    r_.status = r.status;
    r_.reason = std::move(r.reason);
    r_.headers = std::move(r.headers);
    length_ = body_length(r_.headers, r.body.size());
    Status s = append(r.body);
    finished_ = true;
    co_return s;
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap h,
                                           std::optional<uint64_t> len) override {
    r_.status = status;
    r_.headers = std::move(h);
    length_ = body_length(r_.headers, len);
    co_return Status();
  }

 private:
  Status append(std::string_view chunk) {
    if (bodiless(req_.method, r_.status)) return Status();
    if (r_.body.size() + chunk.size() > max_body_) {
      over_ = true;
      return Status::invalid_argument("subrequest body too large");
    }
    if (length_ && r_.body.size() + chunk.size() > *length_) {
      return Status::io_error("subrequest body beyond its length");
    }
    r_.body.append(chunk);
    return Status();
  }

  Request req_;
  BodySource* body_;  // nullptr: no request body
  size_t max_body_;
  Response r_{0, "", {}, ""};
  std::optional<uint64_t> length_;
  bool finished_ = false, over_ = false;
};

net::awaitable<Result<Response>> run_collecting(Next app, Request req, ProxyEnv env,
                                                BodySource* body, size_t max_body) {
  CollectingExchange ex(std::move(req), body, max_body);
  co_await app(ex, env);
  co_return std::move(ex).result();
}

}  // namespace

net::awaitable<Result<Response>> run_subrequest(const Next& app, Request req, ProxyEnv env,
                                                size_t max_body) {
  return run_collecting(app, std::move(req), std::move(env), nullptr, max_body);
}

net::awaitable<Result<Response>> run_subrequest_with_body(const Next& app, Request req,
                                                          ProxyEnv env, BodySource& body,
                                                          size_t max_body) {
  return run_collecting(app, std::move(req), std::move(env), &body, max_body);
}

// ---- SubrequestPile ----------------------------------------------------------------------------

struct SubrequestPile::State {
  explicit State(const net::any_io_executor& ex) : wake(ex) {}
  void finish(Done d) {
    --running;
    done.push_back(std::move(d));
    wake.cancel();
  }
  net::steady_timer wake;  // waited on by next_done() only
  size_t running = 0;
  std::deque<Done> done;
};

SubrequestPile::SubrequestPile(const net::any_io_executor& executor)
    : state_(std::make_shared<State>(executor)) {}

size_t SubrequestPile::in_flight() const { return state_->running + state_->done.size(); }

void SubrequestPile::spawn(const Next& app, Request req, ProxyEnv env, size_t max_body,
                           size_t tag) {
  ++state_->running;
  auto state = state_;
  common::spawn_logged(
      state->wake.get_executor(),
      [state, app, req = std::move(req), env = std::move(env), max_body,
       tag]() mutable -> net::awaitable<void> {
        auto answer = co_await run_subrequest(app, std::move(req), std::move(env), max_body);
        state->finish(Done{tag, std::move(answer)});
      },
      "subrequest pile",
      [state, tag] { state->finish(Done{tag, Status::io_error("subrequest failed")}); });
}

net::awaitable<SubrequestPile::Done> SubrequestPile::next_done() {
  while (state_->done.empty()) {
    state_->wake.expires_at(net::steady_timer::time_point::max());
    auto [ec] = co_await state_->wake.async_wait(kTuple);
    (void)ec;
  }
  Done d = std::move(state_->done.front());
  state_->done.pop_front();
  co_return d;
}

net::awaitable<Result<size_t>> StringBody::read(std::span<char> buf) {
  size_t n = std::min(buf.size(), data_.size());
  std::memcpy(buf.data(), data_.data(), n);
  data_.remove_prefix(n);
  co_return n;
}

}  // namespace apus::proxy
