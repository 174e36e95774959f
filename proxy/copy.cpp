// copy: Swift's server-side copy (swift-protocol.md §15): COPY with Destination, and PUT with
// X-Copy-From. The source is read with a GET subrequest and its body streamed into a PUT
// subrequest, both through the rest of the pipeline, so the user's read and write rights are
// checked on each side as Swift checks them. Memory stays at one chunk: the GET's writes wait
// until the PUT has read what they hand over.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>

#include "common/async.h"
#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/middleware.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::swob_response;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);

// A one-chunk hand-over between two coroutines of one worker thread.
class Pipe {
 public:
  explicit Pipe(const net::any_io_executor& ex) : wake_reader_(ex), wake_writer_(ex) {}

  // Producer: hands `chunk` over and waits until the reader took all of it.
  net::awaitable<Status> push(std::string_view chunk) {
    if (cancelled_) co_return Status::cancelled("copy sink gone");
    pending_ = chunk;
    wake_reader_.cancel();
    while (!pending_.empty() && !cancelled_) co_await wait(wake_writer_);
    co_return cancelled_ ? Status::cancelled("copy sink gone") : Status();
  }
  // Producer: no more data.
  void close() {
    closed_ = true;
    wake_reader_.cancel();
  }
  // Consumer: up to buf.size() bytes; 0 at the end.
  net::awaitable<Result<size_t>> pull(std::span<char> buf) {
    while (pending_.empty() && !closed_) co_await wait(wake_reader_);
    if (pending_.empty()) co_return size_t{0};
    size_t n = std::min(buf.size(), pending_.size());
    std::memcpy(buf.data(), pending_.data(), n);
    pending_.remove_prefix(n);
    if (pending_.empty()) wake_writer_.cancel();
    co_return n;
  }
  // Consumer: stop reading; a waiting producer gives up.
  void cancel() {
    cancelled_ = true;
    wake_writer_.cancel();
  }

 private:
  static net::awaitable<void> wait(net::steady_timer& t) {
    t.expires_at(net::steady_timer::time_point::max());
    auto [ec] = co_await t.async_wait(kTuple);
    (void)ec;
  }
  std::string_view pending_;
  bool closed_ = false, cancelled_ = false;
  net::steady_timer wake_reader_, wake_writer_;
};

// The GET subrequest: no request body; its response head is kept and its body goes into a
// Pipe.
class SourceExchange final : public Exchange {
 public:
  SourceExchange(Request req, Pipe& pipe, net::steady_timer& head_ready)
      : req_(std::move(req)), pipe_(pipe), head_ready_(head_ready) {}
  int status = 0;
  HeaderMap headers;
  std::optional<uint64_t> length;

  const Request& request() const override { return req_; }
  net::awaitable<Result<size_t>> read_body(std::span<char>) override { co_return size_t{0}; }
  net::awaitable<Status> send_continue() override { co_return Status(); }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    return pipe_.push(chunk);
  }
  net::awaitable<Status> finish_response() override {
    pipe_.close();
    co_return Status();
  }
  bool response_started() const override { return status != 0; }
  int response_status() const override { return status; }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    set_head(r.status, std::move(r.headers), r.body.size());
    Status s = r.body.empty() ? Status() : co_await pipe_.push(r.body);
    pipe_.close();
    co_return s;
  }
  net::awaitable<Status> do_start_response(int st, HeaderMap h,
                                           std::optional<uint64_t> len) override {
    set_head(st, std::move(h), len);
    co_return Status();
  }

 private:
  void set_head(int st, HeaderMap h, std::optional<uint64_t> len) {
    status = st;
    headers = std::move(h);
    length = headers.contains("Content-Length")
                 ? std::optional<uint64_t>(std::strtoull(
                       std::string(headers.get_or("Content-Length", "0")).c_str(), nullptr, 10))
                 : len;
    head_ready_.cancel();
  }
  Request req_;
  Pipe& pipe_;
  net::steady_timer& head_ready_;
};

// The PUT subrequest: its body comes from the Pipe; its response goes to the client with the
// X-Copied-From headers added on success.
class SinkExchange final : public ExchangeWrapper {
 public:
  SinkExchange(Exchange& client, Request req, Pipe& pipe, HeaderMap copied)
      : ExchangeWrapper(client), pipe_(pipe), copied_(std::move(copied)) {
    mutable_request() = std::move(req);
  }
  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    return pipe_.pull(buf);
  }
  net::awaitable<Status> send_continue() override { co_return Status(); }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    add_copied(r.status, r.headers);
    return ExchangeWrapper::do_respond(std::move(r));
  }
  net::awaitable<Status> do_start_response(int st, HeaderMap h,
                                           std::optional<uint64_t> len) override {
    add_copied(st, h);
    return ExchangeWrapper::do_start_response(st, std::move(h), len);
  }

 private:
  void add_copied(int status, HeaderMap& h) {
    if (status < 200 || status >= 300) return;
    for (const auto& [k, v] : copied_) h.set(k, v);
  }
  Pipe& pipe_;
  HeaderMap copied_;
};


// Swift's _check_path_header(): "[/]<container>/<object>" from a header, or nullopt.
std::optional<std::pair<std::string, std::string>> container_and_object(std::string_view value) {
  std::string v = common::http::percent_decode(value);
  if (v.empty() || v[0] != '/') v = "/" + v;
  auto segs = common::http::split_path(v, 2, 2, true);
  if (!segs.ok()) return std::nullopt;
  return std::make_pair(*(*segs)[0], *(*segs)[1]);
}

// Swift's check_account_format(): a 412 body when the account name is not usable.
std::optional<std::string> account_format_error(std::string_view account) {
  if (account.empty()) return "Account name cannot be empty";
  if (account.find('/') != std::string_view::npos) return "Account name cannot contain slashes";
  return std::nullopt;
}

class Copy final : public Middleware {
 public:
  explicit Copy(const common::Constraints& constraints) : constraints_(constraints) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 4, 4, true);
    bool object = segs.ok();
    if (object && req.method == "OPTIONS") {
      // Swift's copy adds COPY to a successful object OPTIONS answer.
      HeaderEditor with_copy(ex, [](int status, HeaderMap& h) {
        if (status < 200 || status >= 300) return;
        for (const char* name : {"Allow", "Access-Control-Allow-Methods"}) {
          auto v = h.get(name);
          if (v && v->find("COPY") == std::string_view::npos) {
            h.set(name, std::string(*v) + ", COPY");
          }
        }
      });
      co_await next(with_copy, env);
      co_return;
    }
    if (!object || !((req.method == "PUT" && !req.headers.get_or("X-Copy-From", "").empty()) ||
                     req.method == "COPY")) {
      co_await next(ex, env);
      co_return;
    }
    std::string version = *(*segs)[0], account = *(*segs)[1];
    std::string container = *(*segs)[2], obj = *(*segs)[3];
    Request put = req;
    if (req.method == "COPY") {
      auto dest = req.headers.get("Destination");
      if (!dest || dest->empty()) {
        (void)co_await ex.respond(common::http::swob_response_with_body(412, "Destination header required"));
        co_return;
      }
      std::string dest_account = account;
      if (auto da = req.headers.get("Destination-Account")) {
        dest_account = common::http::percent_decode(*da);
        if (auto err = account_format_error(dest_account)) {
          (void)co_await ex.respond(common::http::swob_response_with_body(412, *err));
          co_return;
        }
        put.headers.set("X-Copy-From-Account", common::http::quote(account));
        put.headers.erase("Destination-Account");
      }
      auto where = container_and_object(*dest);
      if (!where) {
        (void)co_await ex.respond(common::http::swob_response_with_body(412, 
            "Destination header must be of the form <container name>/<object name>"));
        co_return;
      }
      put.method = "PUT";
      put.target = common::http::quote("/" + version + "/" + dest_account + "/" + where->first +
                                       "/" + where->second);
      if (!req.query().empty()) put.target += "?" + std::string(req.query());  // Swift keeps it
      put.headers.set("X-Copy-From", common::http::quote("/" + container + "/" + obj));
      put.headers.erase("Destination");
      put.content_length = 0;
      account = dest_account;
    }
    co_await copy_put(ex, env, next, std::move(put), version, account);
  }

 private:
  net::awaitable<void> copy_put(Exchange& ex, ProxyEnv& env, const Next& next, Request put,
                                const std::string& version, const std::string& dest_account) {
    if ((put.content_length && *put.content_length > 0) || put.chunked) {
      (void)co_await ex.respond(
          common::http::text_response(400, "Copy requests require a zero byte body"));
      co_return;
    }
    std::string source_account = dest_account;
    if (auto sa = put.headers.get("X-Copy-From-Account")) {
      source_account = common::http::percent_decode(*sa);
      if (auto err = account_format_error(source_account)) {
        (void)co_await ex.respond(common::http::swob_response_with_body(412, *err));
        co_return;
      }
    }
    auto source = container_and_object(put.headers.get_or("X-Copy-From", ""));
    if (!source) {
      (void)co_await ex.respond(common::http::swob_response_with_body(412, 
          "X-Copy-From header must be of the form <container name>/<object name>"));
      co_return;
    }
    std::string source_path = "/" + version + "/" + source_account + "/" + source->first + "/" +
                              source->second;

    // The source GET, with the copy's conditional and Range headers.
    Request get = put;
    get.method = "GET";
    get.target = common::http::quote(source_path);
    if (!put.query().empty()) {
      get.target += "?" + std::string(put.query());  // copy_get() keeps it: ?symlink=get
    }
    get.headers.erase("X-Backend-Storage-Policy-Index");
    get.headers.set("X-Newest", "true");
    get.content_length = 0;
    get.chunked = false;
    auto executor = co_await net::this_coro::executor;
    Pipe pipe(executor);
    net::steady_timer head_ready(executor, net::steady_timer::time_point::max());
    net::steady_timer source_done(executor, net::steady_timer::time_point::max());
    bool finished = false;
    SourceExchange source_ex(std::move(get), pipe, head_ready);
    ProxyEnv source_env = sub_env(env);
    // Ends the source side: a head (500 when the source never answered) and the end of the body.
    auto end_source = [&] {
      if (source_ex.status == 0) {
        source_ex.status = 500;
        head_ready.cancel();
      }
      pipe.close();
      finished = true;
      source_done.cancel();
    };
    common::spawn_logged(
        executor,
        [&]() -> net::awaitable<void> {
          co_await next(source_ex, source_env);
          end_source();
        },
        "copy source GET", end_source);
    if (source_ex.status == 0) {
      auto [ec] = co_await head_ready.async_wait(kTuple);
      (void)ec;
    }

    auto wait_source = [&]() -> net::awaitable<void> {
      pipe.cancel();
      while (!finished) {
        source_done.expires_at(net::steady_timer::time_point::max());
        auto [ec] = co_await source_done.async_wait(kTuple);
        (void)ec;
      }
    };
    int status = source_ex.status;
    if (status >= 300) {
      // Swift answers with the source's own answer (404, 412, 304...).
      Response r;
      r.status = status;
      r.headers = source_ex.headers;
      std::array<char, 16384> buf;
      for (;;) {
        auto n = co_await pipe.pull(buf);
        if (!n.ok() || *n == 0) break;
        r.body.append(buf.data(), *n);
      }
      co_await wait_source();
      r.headers.erase("Content-Length");
      (void)co_await ex.respond(std::move(r));
      co_return;
    }
    if (!source_ex.length ||
        static_cast<int64_t>(*source_ex.length) > constraints_.max_file_size) {
      co_await wait_source();
      (void)co_await ex.respond(swob_response(413));
      co_return;
    }

    // The sink PUT: the source's metadata, then the request's own headers on top.
    Request sink = put;
    HeaderMap h;
    if (common::config_true_value(put.headers.get_or("X-Fresh-Metadata", "false"))) {
      h = put.headers;  // only the source's sysmeta survives
      for (const auto& [k, v] : source_ex.headers) {
        if (common::http::istarts_with(k, "x-object-sysmeta-")) h.set(k, v);
      }
    } else {
      for (const auto& [k, v] : source_ex.headers) {
        if (iequals(k, "x-static-large-object") || iequals(k, "x-object-manifest") ||
            iequals(k, "etag") || iequals(k, "content-type") || iequals(k, "x-timestamp") ||
            iequals(k, "x-backend-timestamp")) {
          continue;
        }
        h.set(k, v);
      }
      for (const auto& [k, v] : put.headers) h.set(k, v);
    }
    if (status == 200 && !source_ex.headers.contains("X-Static-Large-Object") &&
        !source_ex.headers.contains("X-Object-Manifest")) {
      if (auto etag = source_ex.headers.get("Etag")) h.set("Etag", *etag);
    }
    h.erase("X-Copy-From");
    h.erase("X-Copy-From-Account");
    h.erase("Content-Length");
    h.erase("Transfer-Encoding");
    if (put.headers.get_or("Content-Type", "").empty()) {
      h.set("Content-Type", source_ex.headers.get_or("Content-Type", "application/octet-stream"));
    }
    h.set("Content-Length", std::to_string(*source_ex.length));
    sink.headers = std::move(h);
    sink.content_length = source_ex.length;
    sink.chunked = false;
    sink.expect_continue = false;

    HeaderMap copied;
    copied.set("X-Copied-From-Account", common::http::quote(source_account));
    copied.set("X-Copied-From",
               common::http::quote(source->first + "/" + source->second));
    if (auto lm = source_ex.headers.get("Last-Modified")) copied.set("X-Copied-From-Last-Modified", *lm);
    SinkExchange sink_ex(ex, std::move(sink), pipe, std::move(copied));
    ProxyEnv sink_env = sub_env(env);
    sink_env.source = "SSC";
    co_await next(sink_ex, sink_env);
    co_await wait_source();
    if (!sink_ex.response_started()) (void)co_await ex.respond(swob_response(500));
  }

  // A subrequest's env: the same user and trans-id, authorization decided afresh.
  static ProxyEnv sub_env(const ProxyEnv& env) {
    ProxyEnv sub;
    sub.trans_id = env.trans_id;
    sub.start_time = env.start_time;
    sub.authorize = env.authorize;
    sub.remote_user = env.remote_user;
    sub.clean_acl = env.clean_acl;
    sub.memcache = env.memcache;
    sub.log_info = env.log_info;
    return sub;
  }

  const common::Constraints& constraints_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_copy(const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<Copy>(context.swift.constraints));
}

}  // namespace apus::proxy
