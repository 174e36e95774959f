// Subrequests without sockets: a fake `next` scripts the answer (streamed or whole, cut short,
// too long, never given) and the tests check what the reader of a Subrequest or the caller of
// run_subrequest sees, how far a streamed body runs ahead of its reader, and that closing or
// dropping a subrequest mid-body ends its request cleanly.
#include "proxy/subrequest.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

// Runs the coroutine `f()` to its end on a fresh io_context (and everything it spawned).
template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

// Lets every other ready coroutine of the thread run a while.
net::awaitable<void> let_others_run(int rounds = 50) {
  auto ex = co_await net::this_coro::executor;
  for (int i = 0; i < rounds; ++i) co_await net::post(ex, net::use_awaitable);
}

// Byte i of every scripted body.
char byte_at(uint64_t i) { return static_cast<char>('a' + i % 26); }

// A streamed answer: `chunks` writes of `chunk` bytes after a head announcing `announced`.
struct Script {
  int status = 200;
  int chunks = 4;
  size_t chunk = 1000;
  std::optional<uint64_t> announced = 4000;
  bool finish = true;        // false: the request ends without finish_response()
  uint64_t written = 0;      // bytes whose write_body() returned
  Status last_write;         // what the last write_body() returned
  bool ended = false;
  std::string seen_target;   // the request the app saw
  ProxyEnv seen_env;
};

Next streaming_app(Script& s) {
  return [&s](Exchange& ex, ProxyEnv& env) -> net::awaitable<void> {
    s.seen_target = ex.request().target;
    s.seen_env = env;
    HeaderMap h;
    h.set("X-Object-Meta-Color", "blue");
    Status st = co_await ex.start_response(s.status, std::move(h), s.announced);
    std::string buf(s.chunk, '\0');
    for (int c = 0; st.ok() && c < s.chunks; ++c) {
      for (size_t i = 0; i < s.chunk; ++i) buf[i] = byte_at(s.written + i);
      st = co_await ex.write_body(buf);
      s.last_write = st;
      if (st.ok()) s.written += s.chunk;
    }
    if (st.ok() && s.finish) (void)co_await ex.finish_response();
    s.ended = true;
  };
}

// An app answering with one whole Response.
Next whole_app(Response r) {
  return [r](Exchange& ex, ProxyEnv&) -> net::awaitable<void> { (void)co_await ex.respond(r); };
}

Request get(std::string path = "/v1/AUTH_a/c/o") {
  return make_subrequest("GET", path, "", {});
}

// Reads a Subrequest to its end; the body, or the first failure.
net::awaitable<Result<std::string>> drain(Subrequest& sub) {
  std::string out;
  std::array<char, 777> buf;  // not a divisor of the chunk size
  for (;;) {
    auto n = co_await sub.read(buf);
    if (!n.ok()) co_return n.status();
    if (*n == 0) co_return out;
    out.append(buf.data(), *n);
  }
}

bool is_scripted_body(const std::string& body) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != byte_at(i)) return false;
  }
  return true;
}

TEST_CASE("subrequest: the head comes back first, then the whole body, then 0") {
  Script s;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{});
    CHECK(sub->status() == 200);
    CHECK(sub->headers().get_or("X-Object-Meta-Color", "") == "blue");
    REQUIRE(sub->length().has_value());
    CHECK(*sub->length() == 4000);
    auto body = co_await drain(*sub);
    REQUIRE(body.ok());
    CHECK(body->size() == 4000);
    CHECK(is_scripted_body(*body));
    auto again = co_await sub->read(std::span<char>());
    CHECK((again.ok() && *again == 0));
    co_await sub->close();
  });
  CHECK(s.ended);
}

TEST_CASE("subrequest: the Content-Length header gives the length") {
  Response r;
  r.headers.set("Content-Length", "5");
  r.body = "hello";
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(whole_app(r), get(), ProxyEnv{}, 1 << 16);
    CHECK(sub->length() == std::optional<uint64_t>(5));
    auto body = co_await sub->read_all(100);
    REQUIRE(body.ok());
    CHECK(*body == "hello");
    co_await sub->close();
  });
}

TEST_CASE("subrequest: a HEAD has no body whatever its Content-Length") {
  Response r;
  r.headers.set("Content-Length", "12345");
  run([&]() -> net::awaitable<void> {
    Request head = make_subrequest("HEAD", "/v1/a/c/o", "", {});
    auto sub = co_await Subrequest::start(whole_app(r), std::move(head), ProxyEnv{});
    CHECK(sub->length() == std::optional<uint64_t>(12345));
    auto body = co_await sub->read_all(10);
    REQUIRE(body.ok());
    CHECK(body->empty());
    co_await sub->close();
  });
}

TEST_CASE("subrequest: a request that ends without an answer gives a 500") {
  Next silent = [](Exchange&, ProxyEnv&) -> net::awaitable<void> { co_return; };
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(silent, get(), ProxyEnv{});
    CHECK(sub->status() == 500);
    auto body = co_await sub->read_all(10);
    CHECK(body.ok());
    co_await sub->close();
  });
}

TEST_CASE("subrequest: without read-ahead the writer waits for the reader chunk by chunk") {
  Script s;
  s.chunks = 20;
  s.announced = 20000;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, 0);
    uint64_t read = 0;
    std::array<char, 300> buf;
    for (;;) {
      co_await let_others_run();
      CHECK(sub->buffered() <= s.chunk);
      CHECK(s.written <= read + s.chunk);  // the write in progress is not counted yet
      auto n = co_await sub->read(buf);
      REQUIRE(n.ok());
      if (*n == 0) break;
      read += *n;
    }
    CHECK(read == 20000);
    co_await sub->close();
  });
}

TEST_CASE("subrequest: read-ahead fills up to its bound and no further") {
  Script s;
  s.chunks = 50;
  s.announced = 50000;
  const size_t read_ahead = 4096;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, read_ahead);
    std::string body;
    std::array<char, 1500> buf;
    for (;;) {
      co_await let_others_run();
      // The writer ran ahead as far as allowed: one chunk past read_ahead at most, and it did
      // prefetch (unless the body is nearly all in).
      CHECK(sub->buffered() <= read_ahead + s.chunk);
      CHECK(s.written - body.size() <= read_ahead + s.chunk);
      if (s.written < 50000) CHECK(sub->buffered() > read_ahead);
      auto n = co_await sub->read(buf);
      REQUIRE(n.ok());
      if (*n == 0) break;
      body.append(buf.data(), *n);
    }
    CHECK(body.size() == 50000);
    CHECK(is_scripted_body(body));
    co_await sub->close();
  });
}

TEST_CASE("subrequest: a body cut short of its length is an error, not a short success") {
  Script s;
  s.announced = 10000;  // four chunks of 1000 then the request ends
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, 2000);
    auto body = co_await drain(*sub);
    REQUIRE_FALSE(body.ok());
    CHECK(body.status().to_string().find("short") != std::string::npos);
    co_await sub->close();
  });
}

TEST_CASE("subrequest: a request that ends mid-body without finishing is an error") {
  Script s;
  s.announced = std::nullopt;  // chunked: only finish_response() says the body is whole
  s.finish = false;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{});
    CHECK(!sub->length().has_value());
    auto body = co_await sub->read_all(1 << 20);
    CHECK_FALSE(body.ok());
    co_await sub->close();
  });
  s = Script{};
  s.announced = std::nullopt;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{});
    auto body = co_await sub->read_all(1 << 20);
    REQUIRE(body.ok());
    CHECK(body->size() == 4000);
    co_await sub->close();
  });
}

TEST_CASE("subrequest: a body beyond its length is an error") {
  Script s;
  s.announced = 2500;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, 1 << 16);
    auto body = co_await drain(*sub);
    CHECK_FALSE(body.ok());
    co_await sub->close();
  });
  CHECK_FALSE(s.last_write.ok());
}

TEST_CASE("subrequest: read_all refuses more than max_bytes") {
  Script s;
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{});
    auto body = co_await sub->read_all(3999);
    REQUIRE_FALSE(body.ok());
    CHECK(body.status().code() == common::Status::Code::kInvalidArgument);
    co_await sub->close();
  });
  CHECK(s.ended);
}

TEST_CASE("subrequest: close() mid-body ends the request and later reads fail") {
  for (size_t read_ahead : {size_t{0}, size_t{3000}}) {
    Script s;
    s.chunks = 100;
    s.announced = 100000;
    bool closed = false;
    run([&]() -> net::awaitable<void> {
      auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, read_ahead);
      std::array<char, 500> buf;
      auto n = co_await sub->read(buf);
      CHECK((n.ok() && *n == 500));
      co_await sub->close();
      closed = true;
      CHECK(s.ended);  // close() returns once the request has ended
      CHECK(s.last_write.code() == common::Status::Code::kCancelled);
      CHECK(s.written < 100000);
      auto after = co_await sub->read(buf);
      CHECK_FALSE(after.ok());
      co_await sub->close();  // idempotent
    });
    CHECK(closed);
  }
}

TEST_CASE("subrequest: one dropped without close() still ends its request, which keeps its state") {
  Script s;
  s.chunks = 100;
  s.announced = 100000;
  run([&]() -> net::awaitable<void> {
    {
      auto sub = co_await Subrequest::start(streaming_app(s), get(), ProxyEnv{}, 0);
      std::array<char, 10> buf;
      (void)co_await sub->read(buf);
    }  // destroyed while the request waits in write_body()
    CHECK_FALSE(s.ended);
    co_await let_others_run();
  });
  CHECK(s.ended);
  CHECK(s.last_write.code() == common::Status::Code::kCancelled);
}

TEST_CASE("run_subrequest: collects the whole answer up to max_body") {
  Script s;
  run([&]() -> net::awaitable<void> {
    auto r = co_await run_subrequest(streaming_app(s), get(), ProxyEnv{}, 4000);
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK(r->headers.get_or("X-Object-Meta-Color", "") == "blue");
    CHECK(r->body.size() == 4000);
    CHECK(is_scripted_body(r->body));
  });
  s = Script{};
  run([&]() -> net::awaitable<void> {
    auto r = co_await run_subrequest(streaming_app(s), get(), ProxyEnv{}, 3999);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == common::Status::Code::kInvalidArgument);
  });
  CHECK_FALSE(s.last_write.ok());  // the request was told to stop
  CHECK(s.written < 4000);
  Response whole;
  whole.status = 404;
  whole.body = std::string(100, 'x');
  run([&]() -> net::awaitable<void> {
    auto r = co_await run_subrequest(whole_app(whole), get(), ProxyEnv{}, 99);
    CHECK_FALSE(r.ok());
    auto ok = co_await run_subrequest(whole_app(whole), get(), ProxyEnv{}, 100);
    REQUIRE(ok.ok());
    CHECK(ok->status == 404);
    CHECK(ok->body == whole.body);
  });
}

TEST_CASE("run_subrequest: a cut-short body or no answer") {
  Script s;
  s.announced = 5000;
  Next silent = [](Exchange&, ProxyEnv&) -> net::awaitable<void> { co_return; };
  run([&]() -> net::awaitable<void> {
    auto r = co_await run_subrequest(streaming_app(s), get(), ProxyEnv{}, 1 << 20);
    CHECK_FALSE(r.ok());
    auto none = co_await run_subrequest(silent, get(), ProxyEnv{}, 1 << 20);
    REQUIRE(none.ok());
    CHECK(none->status == 500);
  });
}

// Gives `total` scripted bytes in pieces of at most 333.
class ScriptedBody final : public BodySource {
 public:
  explicit ScriptedBody(uint64_t total) : total_(total) {}
  net::awaitable<Result<size_t>> read(std::span<char> buf) override {
    size_t n = std::min<uint64_t>({buf.size(), 333, total_ - given_});
    for (size_t i = 0; i < n; ++i) buf[i] = byte_at(given_ + i);
    given_ += n;
    co_return n;
  }

 private:
  uint64_t total_, given_ = 0;
};

TEST_CASE("run_subrequest_with_body: the request reads its body from the BodySource") {
  std::string got;
  Next put_app = [&got](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
    std::array<char, 1024> buf;
    for (;;) {
      auto n = co_await ex.read_body(buf);
      if (!n.ok() || *n == 0) break;
      got.append(buf.data(), *n);
    }
    Response r;
    r.status = 201;
    r.headers.set("Etag", "x");
    (void)co_await ex.respond(std::move(r));
  };
  ScriptedBody body(5000);
  run([&]() -> net::awaitable<void> {
    Request req = make_subrequest("PUT", "/v1/a/c/o", "", {});
    req.content_length = 5000;
    auto r = co_await run_subrequest_with_body(put_app, std::move(req), ProxyEnv{}, body, 100);
    REQUIRE(r.ok());
    CHECK(r->status == 201);
  });
  CHECK(got.size() == 5000);
  CHECK(is_scripted_body(got));
}

TEST_CASE("run_subrequest_with_body: a Subrequest's body feeds a PUT, a failure included") {
  Script source;
  source.announced = 9000;  // ends at 4000: the PUT must see a failed read, never a 0
  std::optional<Status> put_saw;
  Next put_app = [&put_saw](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
    std::array<char, 1024> buf;
    for (;;) {
      auto n = co_await ex.read_body(buf);
      if (!n.ok()) {
        put_saw = n.status();
        co_return co_await ex.reply(common::http::Response{499, "", {}, ""});
      }
      if (*n == 0) break;
    }
    put_saw = Status();
    co_return co_await ex.reply(common::http::Response{201, "", {}, ""});
  };
  run([&]() -> net::awaitable<void> {
    auto src = co_await Subrequest::start(streaming_app(source), get(), ProxyEnv{});
    SubrequestBody body(*src);
    Request put = make_subrequest("PUT", "/v1/a/c/o2", "", {});
    auto r = co_await run_subrequest_with_body(put_app, std::move(put), ProxyEnv{}, body, 100);
    co_await src->close();
    REQUIRE(r.ok());
    CHECK(r->status == 499);
  });
  REQUIRE(put_saw.has_value());
  CHECK_FALSE(put_saw->ok());
}

TEST_CASE("make_subrequest: the path is quoted as Swift's quote() does, the query kept") {
  HeaderMap h;
  h.set("X-Newest", "true");
  Request r = make_subrequest("GET", "/v1/AUTH_a/c d/o\xc3\xa9?#%", "format=json&prefix=a%2Fb", h);
  CHECK(r.method == "GET");
  CHECK(r.target == "/v1/AUTH_a/c%20d/o%C3%A9%3F%23%25?format=json&prefix=a%2Fb");
  CHECK(r.path() == "/v1/AUTH_a/c%20d/o%C3%A9%3F%23%25");
  CHECK(r.headers.get_or("X-Newest", "") == "true");
  CHECK(r.content_length == std::optional<uint64_t>(0));
  CHECK(make_subrequest("HEAD", "/v1/a", "", {}).target == "/v1/a");
}

TEST_CASE("subrequest_env: the user and trans-id carry over, the request's own state does not") {
  ProxyEnv env;
  env.trans_id = "tx123";
  env.remote_user = "test,test:tester,AUTH_test";
  env.authorize = [](const Request&, ProxyEnv&)
      -> net::awaitable<std::optional<Response>> { co_return std::nullopt; };
  env.acl = "r:*";
  env.swift_owner = true;
  env.log_info["k"] = "v";
  env.add_headers.set("X-Account-Sysmeta-Core-Access-Control", "{}");
  env.inbound_x_timestamp = "1.0";
  ProxyEnv sub = subrequest_env(env, "SLO");
  CHECK(sub.trans_id == "tx123");
  CHECK(sub.remote_user == env.remote_user);
  CHECK(static_cast<bool>(sub.authorize));
  CHECK(sub.log_info == env.log_info);
  CHECK(sub.source == "SLO");
  CHECK_FALSE(sub.acl.has_value());
  CHECK_FALSE(sub.swift_owner);
  CHECK(sub.add_headers.empty());
  CHECK_FALSE(sub.inbound_x_timestamp.has_value());
}

TEST_CASE("subrequest: the request and env reach the app") {
  Script s;
  ProxyEnv env;
  env.trans_id = "tx9";
  run([&]() -> net::awaitable<void> {
    auto sub = co_await Subrequest::start(streaming_app(s), get("/v1/a/c/o o"),
                                          subrequest_env(env, "DLO"));
    co_await sub->close();
  });
  CHECK(s.seen_target == "/v1/a/c/o%20o");
  CHECK(s.seen_env.trans_id == "tx9");
  CHECK(s.seen_env.source == "DLO");
}


TEST_CASE("subrequest_headers: what Swift's make_env() carries over, and the agent") {
  Request client;
  client.headers.set("Referer", "http://example.com/page");
  client.headers.set("Host", "cluster.example");
  client.headers.set("X-Auth-Token", "AUTH_tk1");
  client.headers.set("User-Agent", "curl/7.88");
  client.headers.set("Range", "bytes=0-1");        // the subrequest's own business
  client.headers.set("X-Object-Meta-A", "b");      // not a subrequest's
  HeaderMap h = subrequest_headers(client, "DLO MultipartGET");
  CHECK(h.get_or("Referer", "") == "http://example.com/page");
  CHECK(h.get_or("Host", "") == "cluster.example");
  CHECK(h.get_or("X-Auth-Token", "") == "AUTH_tk1");
  CHECK(h.get_or("User-Agent", "") == "curl/7.88 DLO MultipartGET");
  CHECK_FALSE(h.contains("Range"));
  CHECK_FALSE(h.contains("X-Object-Meta-A"));
  // Without a client agent, Swift's '%(orig)s SLO'.strip() is just "SLO".
  CHECK(subrequest_headers(Request{}, "SLO").get_or("User-Agent", "") == "SLO");
  // Swift's make_subrequest() default agent 'Swift' names no client agent.
  CHECK(subrequest_headers(client, "Swift", false).get_or("User-Agent", "") == "Swift");
}

// An app that answers `status` after `rounds` turns of the event loop, and counts how many of
// its requests run at once.
struct Slow {
  int running = 0, most = 0;
  Next app() {
    return [this](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
      most = std::max(most, ++running);
      const std::string& t = ex.request().target;
      int rounds = std::stoi(t.substr(t.rfind('/') + 1));
      co_await let_others_run(rounds);
      --running;
      Response r{200 + rounds, "", {}, t};
      co_return co_await ex.reply(std::move(r));
    };
  }
};

TEST_CASE("subrequest pile: answers come in the order they finish, each with its tag") {
  Slow slow;
  std::vector<std::pair<size_t, int>> got;  // tag, status
  run([&]() -> net::awaitable<void> {
    SubrequestPile pile(co_await net::this_coro::executor);
    pile.spawn(slow.app(), get("/v1/a/c/30"), ProxyEnv{}, 100, 0);
    pile.spawn(slow.app(), get("/v1/a/c/2"), ProxyEnv{}, 100, 1);
    pile.spawn(slow.app(), get("/v1/a/c/10"), ProxyEnv{}, 100, 2);
    CHECK(pile.in_flight() == 3);
    while (pile.in_flight() > 0) {
      auto d = co_await pile.next_done();
      REQUIRE(d.answer.ok());
      got.emplace_back(d.tag, d.answer->status);
    }
  });
  CHECK(got == std::vector<std::pair<size_t, int>>{{1, 202}, {2, 210}, {0, 230}});
  CHECK(slow.most == 3);
}

TEST_CASE("subrequest pile: a body over max_body is a failed answer, not a short one") {
  Next big = [](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
    co_return co_await ex.reply(Response{200, "", {}, std::string(500, 'x')});
  };
  run([&]() -> net::awaitable<void> {
    SubrequestPile pile(co_await net::this_coro::executor);
    pile.spawn(big, get("/v1/a/c/o"), ProxyEnv{}, 100, 7);
    auto d = co_await pile.next_done();
    CHECK(d.tag == 7);
    CHECK_FALSE(d.answer.ok());
    CHECK(pile.in_flight() == 0);
  });
}

}  // namespace
}  // namespace apus::proxy
