// The server runtime over real loopback sockets: keep-alive, streaming in both directions,
// 100-continue, the disk pool keeping workers free, many idle connections, drain on stop.
#include "common/http/server.h"

#include <doctest/doctest.h>
#include <openssl/evp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/io/blocking_pool.h"
#include "tests/support/test_server.h"

namespace net = boost::asio;
using apus::common::Status;
using apus::common::http::Exchange;
using apus::common::http::HeaderMap;
using apus::common::http::Response;
using apus::common::http::ServerOptions;
using apus::test::RawClient;
using apus::test::raw_request;
using apus::test::TestServer;

namespace {

// Echoes method and path; reads and counts any body.
net::awaitable<void> echo_handler(Exchange& ex) {
  std::array<char, 8192> buf;
  uint64_t total = 0;
  for (;;) {
    auto n = co_await ex.read_body(buf);
    if (!n.ok()) {
      Response r;
      r.status = apus::common::to_http_status(n.status());
      (void)co_await ex.respond(std::move(r));
      co_return;
    }
    if (*n == 0) break;
    total += *n;
  }
  Response r;
  r.headers.set("X-Body-Bytes", std::to_string(total));
  r.body = ex.request().method + " " + std::string(ex.request().path());
  (void)co_await ex.respond(std::move(r));
}

std::string repeat_pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

}  // namespace

TEST_CASE("serves requests and keeps the connection alive") {
  TestServer server(echo_handler);
  RawClient c(server.port());
  for (int i = 0; i < 3; ++i) {
    REQUIRE(c.send("GET /a/b?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "GET /a/b");
    CHECK(r->headers.contains("Date"));
    CHECK(!r->headers.contains("Connection"));
  }
  REQUIRE(c.send("GET /last HTTP/1.1\r\nConnection: close\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->headers.get_or("Connection", "") == "close");
  CHECK(c.closed_by_peer());
}

TEST_CASE("HTTP/1.0 closes unless keep-alive is asked for") {
  TestServer server(echo_handler);
  RawClient c(server.port());
  REQUIRE(c.send("GET /x HTTP/1.0\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(c.closed_by_peer());
}

TEST_CASE("streams a request body in chunks, Content-Length and chunked") {
  TestServer server(echo_handler);
  std::string body = repeat_pattern(3 * 1024 * 1024 + 17);
  auto r = raw_request(server.port(), "PUT /obj HTTP/1.1\r\nContent-Length: " +
                                          std::to_string(body.size()) + "\r\n\r\n" + body);
  REQUIRE(r);
  CHECK(r->headers.get_or("X-Body-Bytes", "") == std::to_string(body.size()));

  RawClient c(server.port());
  REQUIRE(c.send("PUT /obj HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  size_t sent = 0;
  for (size_t chunk : {1u, 100u, 65536u, 70000u}) {
    char line[32];
    std::snprintf(line, sizeof line, "%zx\r\n", chunk);
    REQUIRE(c.send(line));
    REQUIRE(c.send(std::string(chunk, 'z') + "\r\n"));
    sent += chunk;
  }
  REQUIRE(c.send("0\r\n\r\n"));
  auto r2 = c.read_response();
  REQUIRE(r2);
  CHECK(r2->headers.get_or("X-Body-Bytes", "") == std::to_string(sent));
}

TEST_CASE("Expect: 100-continue gets 100 before the body is read") {
  TestServer server(echo_handler);
  RawClient c(server.port());
  REQUIRE(c.send("PUT /o HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  // Read the interim response by hand: read_response() skips 100s.
  char buf[64] = {};
  ssize_t n = ::recv(c.fd(), buf, sizeof buf - 1, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, n).starts_with("HTTP/1.1 100 Continue\r\n\r\n"));
  REQUIRE(c.send("hello"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->headers.get_or("X-Body-Bytes", "") == "5");
}

TEST_CASE("a handler refusing before 100-continue answers and closes") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    r.status = 409;
    (void)co_await ex.respond(std::move(r));
  });
  RawClient c(server.port());
  REQUIRE(c.send("PUT /o HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 409);
  CHECK(r->headers.get_or("Connection", "") == "close");
}

TEST_CASE("streams a response: chunked without a length, fixed with one") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    bool known = ex.request().path() == "/known";
    std::string piece(10000, 'q');
    (void)co_await ex.start_response(
        200, {}, known ? std::optional<uint64_t>(50000) : std::nullopt);
    for (int i = 0; i < 5; ++i) (void)co_await ex.write_body(piece);
    (void)co_await ex.finish_response();
  });
  RawClient c(server.port());
  REQUIRE(c.send("GET /chunked HTTP/1.1\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->headers.get_or("Transfer-Encoding", "") == "chunked");
  CHECK(r->body.size() == 50000);
  REQUIRE(c.send("GET /known HTTP/1.1\r\n\r\n"));
  r = c.read_response();
  REQUIRE(r);
  CHECK(r->headers.get_or("Content-Length", "") == "50000");
  CHECK(r->body.size() == 50000);
}

TEST_CASE("HEAD responses carry the declared length and no body") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    r.headers.set("Content-Length", "1234");
    (void)co_await ex.respond(std::move(r));
  });
  RawClient c(server.port());
  REQUIRE(c.send("HEAD /x HTTP/1.1\r\n\r\n"));
  auto r = c.read_response(/*head_request=*/true);
  REQUIRE(r);
  CHECK(r->headers.get_or("Content-Length", "") == "1234");
  // The connection is still in step: a second request works.
  REQUIRE(c.send("HEAD /y HTTP/1.1\r\n\r\n"));
  CHECK(c.read_response(true));
}

TEST_CASE("a handler that gives no response yields 500") {
  TestServer server([](Exchange&) -> net::awaitable<void> { co_return; });
  auto r = raw_request(server.port(), "GET /x HTTP/1.1\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 500);
}

TEST_CASE("/healthcheck answers at once while a handler waits on the disk pool") {
  apus::common::io::BlockingPool pool("disk", 1);
  ServerOptions options;
  options.workers = 1;  // the healthcheck must share the worker with the blocked request
  TestServer server(
      [&](Exchange& ex) -> net::awaitable<void> {
        co_await pool.run([] { std::this_thread::sleep_for(std::chrono::seconds(1)); });
        Response r;
        r.body = "slow";
        (void)co_await ex.respond(std::move(r));
      },
      options);
  RawClient slow(server.port());
  REQUIRE(slow.send("GET /slow HTTP/1.1\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the slow job is running
  auto start = std::chrono::steady_clock::now();
  auto hc = raw_request(server.port(), "GET /healthcheck HTTP/1.1\r\n\r\n");
  auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(hc);
  CHECK(hc->status == 200);
  CHECK(hc->body == "OK");
  // The slow request still has most of its second to go: the worker was not blocked.
  CHECK(elapsed < std::chrono::milliseconds(500));
  auto r = slow.read_response();
  REQUIRE(r);
  CHECK(r->body == "slow");
}

TEST_CASE("with workers = 2 and 1000 idle keep-alive connections, new requests are served") {
  ServerOptions options;
  options.workers = 2;
  TestServer server(echo_handler, options);
  std::vector<RawClient> idle;
  idle.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    idle.emplace_back(server.port());
    // Every tenth makes a request first, so idle connections sit in keep-alive too.
    if (i % 10 == 0) {
      REQUIRE(idle.back().send("GET /warm HTTP/1.1\r\n\r\n"));
      REQUIRE(idle.back().read_response());
    }
  }
  for (int i = 0; i < 20; ++i) {
    auto r = raw_request(server.port(), "GET /fresh HTTP/1.1\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  CHECK(server.server().open_connections() >= 1000);
}

TEST_CASE("stop() lets an in-flight request finish and closes idle connections") {
  apus::common::io::BlockingPool pool("disk", 1);
  auto server = std::make_unique<TestServer>([&](Exchange& ex) -> net::awaitable<void> {
    if (ex.request().path() == "/slow") {
      co_await pool.run([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
    }
    Response r;
    r.body = "done";
    (void)co_await ex.respond(std::move(r));
  });
  uint16_t port = server->port();
  RawClient idle(port);
  REQUIRE(idle.send("GET /warm HTTP/1.1\r\n\r\n"));
  REQUIRE(idle.read_response());
  RawClient busy(port);
  REQUIRE(busy.send("GET /slow HTTP/1.1\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::thread stopper([&] { server.reset(); });
  auto r = busy.read_response();
  stopper.join();
  REQUIRE(r);
  CHECK(r->body == "done");
  CHECK(r->headers.get_or("Connection", "") == "close");
  CHECK(idle.closed_by_peer());
}

TEST_CASE("reuse_port lets a second server bind beside the first, and both serve") {
  ServerOptions options;
  options.reuse_port = true;
  TestServer first(echo_handler, options);
  options.bind_port = first.port();
  options.bind_ip = "127.0.0.1";
  apus::common::http::Server second(options, echo_handler);
  REQUIRE(second.start().ok());
  for (int i = 0; i < 10; ++i) {
    auto r = raw_request(first.port(), "GET /x HTTP/1.1\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  second.stop();
  // Without reuse_port the port is taken.
  ServerOptions plain;
  plain.bind_ip = "127.0.0.1";
  plain.bind_port = first.port();
  apus::common::http::Server third(plain, echo_handler);
  CHECK_FALSE(third.start().ok());
}

TEST_CASE("/metrics reports requests by method and status") {
  TestServer server(echo_handler);
  REQUIRE(raw_request(server.port(), "DELETE /x HTTP/1.1\r\n\r\n"));
  // The worker records a request just after its response is written, so the scrape (perhaps
  // on the other worker) may come first; give it a moment.
  const std::string expected =
      "apus_http_requests_total{method=\"DELETE\",server=\"test\",status=\"200\"} 1";
  std::optional<apus::test::RawResponse> r;
  for (int i = 0; i < 100; ++i) {
    r = raw_request(server.port(), "GET /metrics HTTP/1.1\r\n\r\n");
    if (!r || r->body.find(expected) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(expected) != std::string::npos);
  CHECK(r->body.find("apus_http_request_duration_seconds_bucket") != std::string::npos);
  CHECK(r->body.find("apus_accept_queue_depth") != std::string::npos);
}
