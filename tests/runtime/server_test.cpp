// The server runtime over real loopback sockets: keep-alive, streaming in both directions,
// 100-continue, the disk pool keeping workers free, many idle connections, drain on stop.
#include "common/http/server.h"

#include <doctest/doctest.h>
#include <openssl/evp.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/async.h"
#include "common/config/config.h"
#include "common/http/server_config.h"
#include "common/io/blocking_pool.h"
#include "common/log/log.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_server.h"

namespace net = boost::asio;
using apus::common::Status;
using apus::common::http::Exchange;
using apus::common::http::OrRefusal;
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

// Always true, but not known to be at compile time (keeps a throwing coroutine well formed).
bool true_at_run_time() { return std::getenv("APUS_NEVER_SET_THIS") == nullptr; }

// Sends logs to a file for the life of the object, then back to stderr.
class LogCapture {
 public:
  LogCapture() {
    apus::common::log::configure(
        {.name = "test", .level = apus::common::log::Level::kInfo, .file = dir_.path("log")});
  }
  ~LogCapture() {
    apus::common::log::configure(
        {.name = "swift", .level = apus::common::log::Level::kInfo, .file = "-"});
  }
  std::string text() const {
    apus::common::log::flush();
    std::string out;
    if (FILE* f = std::fopen(dir_.path("log").c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  }

 private:
  apus::test::TempDir dir_{"apus_log_capture"};
};

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

// Answers with what its first body read gave, without waiting for the rest of the body.
net::awaitable<void> first_read(Exchange& ex) {
  std::array<char, 8192> buf;
  auto n = co_await ex.read_body(buf);
  Response r;
  r.status = n.ok() ? 200 : 400;
  if (n.ok()) r.body.assign(buf.data(), *n);
  (void)co_await ex.respond(std::move(r));
}

TEST_CASE("a chunked body's read gives every chunk that has come, and never waits with bytes in "
          "hand") {
  TestServer server(first_read);
  // Three chunks in one segment come out of one read.
  RawClient all(server.port());
  REQUIRE(all.send("PUT /o HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "3\r\nabc\r\n2\r\nde\r\n1\r\nf\r\n0\r\n\r\n"));
  auto r = all.read_response();
  REQUIRE(r);
  CHECK(r->body == "abcdef");
  // A chunk whose trailing CRLF ends what has come (the next size line not sent yet, as a
  // client streaming against the answers does, SSYNC's): the read gives its bytes at once.
  RawClient part(server.port(), std::chrono::seconds(5));
  REQUIRE(part.send("PUT /o HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"));
  auto r2 = part.read_response();
  REQUIRE(r2);
  CHECK(r2->body == "abc");
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

// Answers how read_body_at_most(ex, 10) ended: 200 with the bytes, 413, or 400.
net::awaitable<void> at_most_ten(Exchange& ex) {
  apus::common::http::WholeBody body = co_await apus::common::http::read_body_at_most(ex, 10);
  Response r;
  r.status = body.outcome == apus::common::http::WholeBody::Outcome::kRead       ? 200
             : body.outcome == apus::common::http::WholeBody::Outcome::kTooLarge ? 413
                                                                                  : 400;
  r.body = body.bytes;
  (void)co_await ex.respond(std::move(r));
}

TEST_CASE("read_body_at_most: up to the limit read, one byte past refused, an announced excess "
          "refused before 100 Continue") {
  TestServer server(at_most_ten);
  auto fits = raw_request(server.port(), "PUT /o HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
  REQUIRE(fits);
  CHECK(fits->status == 200);
  CHECK(fits->body == "0123456789");
  auto chunked_fits = raw_request(server.port(),
                                  "PUT /o HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n");
  REQUIRE(chunked_fits);
  CHECK(chunked_fits->status == 200);
  CHECK(chunked_fits->body == "0123456789");
  // Chunked: no length announced, so the eleventh byte is what refuses it.
  auto over = raw_request(server.port(), "PUT /o HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                         "b\r\n0123456789a\r\n0\r\n\r\n");
  REQUIRE(over);
  CHECK(over->status == 413);
  // An announced length over the limit: the answer comes instead of 100 Continue.
  RawClient c(server.port());
  REQUIRE(c.send("PUT /o HTTP/1.1\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n"));
  char buf[64] = {};
  ssize_t n = ::recv(c.fd(), buf, sizeof buf - 1, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, n).starts_with("HTTP/1.1 413"));
}

// Answers with the whole request body (at most 1 MiB), or 400 when it could not be read.
net::awaitable<void> body_back(Exchange& ex) {
  apus::common::http::WholeBody body = co_await apus::common::http::read_body_at_most(ex, 1 << 20);
  Response r;
  r.status = body.outcome == apus::common::http::WholeBody::Outcome::kRead ? 200 : 400;
  r.body = body.bytes;
  (void)co_await ex.respond(std::move(r));
}

TEST_CASE("read_body_at_most: a body of many reads comes back whole, with a length or chunked") {
  TestServer server(body_back);
  std::string body;
  for (int i = 0; body.size() < 150000; ++i) body += std::to_string(i) + ",";
  auto with_length = raw_request(
      server.port(),
      "PUT /o HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  REQUIRE(with_length);
  CHECK(with_length->status == 200);
  CHECK(with_length->body == body);
  std::string chunked = "PUT /o HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 7000) {
    const std::string piece = body.substr(at, 7000);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  auto was_chunked = raw_request(server.port(), chunked + "0\r\n\r\n");
  REQUIRE(was_chunked);
  CHECK(was_chunked->status == 200);
  CHECK(was_chunked->body == body);
}

TEST_CASE("pipelined requests after chunked and Content-Length bodies are each read whole") {
  TestServer server(body_back);
  RawClient c(server.port());
  REQUIRE(
      c.send("PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
             "PUT /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
             "GET /c HTTP/1.1\r\n\r\n"));
  for (const char* want : {"hello world", "abc", ""}) {
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == want);
  }
}

TEST_CASE("a malformed chunk size line is a 400 and the connection closes") {
  TestServer server(body_back);
  RawClient c(server.port());
  REQUIRE(c.send("PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->headers.get_or("Connection", "") == "close");
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

TEST_CASE("a client sending a body answered without being read gets the answer") {
  // A refusal that never reads the body, to a client that sends all of it before reading
  // (no Expect): the server drains what it sends, so its send completes and the answer waits.
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    r.status = 413;
    r.body = "too big";
    (void)co_await ex.respond(std::move(r));
  });
  RawClient c(server.port());
  const std::string body(32 << 20, 'x');
  REQUIRE(c.send("PUT /o HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                 "\r\n\r\n"));
  CHECK(c.send(body));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 413);
  CHECK(r->body == "too big");
  CHECK(r->headers.get_or("Connection", "") == "close");
  CHECK(c.closed_by_peer());
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

namespace {

// What the server sends first, in one recv: what one write put on the wire comes whole on
// loopback.
std::string first_arrival(RawClient& c) {
  pollfd p{c.fd(), POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return "";
  char buf[4096];
  ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

TEST_CASE("a held head goes out with the first body chunk in one write, and cut short it goes alone") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    std::string_view path = ex.request().path();
    ex.hold_head_for_body();
    const bool sized = path != "/chunked";
    (void)co_await ex.start_response(200, {}, sized ? std::optional<uint64_t>(5) : std::nullopt);
    // Long enough that a head sent at once would arrive alone (longer than the HEAD client's
    // patience below).
    const auto wait = std::chrono::milliseconds(ex.request().method == "HEAD" ? 1000 : 100);
    net::steady_timer pause(co_await net::this_coro::executor, wait);
    co_await pause.async_wait(net::use_awaitable);
    if (path == "/short") co_return;  // no body at all: the client gets the head and a close
    (void)co_await ex.write_body("hello");
    (void)co_await ex.finish_response();
  });
  RawClient fixed(server.port());
  REQUIRE(fixed.send("GET /fixed HTTP/1.1\r\n\r\n"));
  std::string got = first_arrival(fixed);
  CHECK(got.starts_with("HTTP/1.1 200 "));
  CHECK(got.ends_with("Content-Length: 5\r\n\r\nhello"));
  // The connection goes on as usual.
  REQUIRE(fixed.send("GET /fixed HTTP/1.1\r\n\r\n"));
  auto again = fixed.read_response();
  REQUIRE(again);
  CHECK(again->body == "hello");

  RawClient chunked(server.port());
  REQUIRE(chunked.send("GET /chunked HTTP/1.1\r\n\r\n"));
  got = first_arrival(chunked);
  CHECK(got.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  CHECK(got.find("\r\n\r\n5\r\nhello\r\n") != std::string::npos);

  // A HEAD answer has no body to wait for: its head goes at once, before the handler ends.
  RawClient head(server.port(), std::chrono::milliseconds(500));
  REQUIRE(head.send("HEAD /fixed HTTP/1.1\r\n\r\n"));
  auto h = head.read_response(/*head_request=*/true);
  REQUIRE(h);
  CHECK(h->status == 200);

  RawClient cut(server.port());
  REQUIRE(cut.send("GET /short HTTP/1.1\r\n\r\n"));
  got = first_arrival(cut);
  CHECK(got.starts_with("HTTP/1.1 200 "));
  CHECK(got.ends_with("Content-Length: 5\r\n\r\n"));
  CHECK(cut.closed_by_peer());
}

TEST_CASE("HEAD responses carry the declared length and no body") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    r.headers.set("Content-Length", ex.request().target == "/negative" ? "-5" : "1234");
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
  // A declared length that is not one is not taken as one (read as an unsigned number, -5
  // was once 18446744073709551611): the answer declares its own empty body.
  REQUIRE(c.send("HEAD /negative HTTP/1.1\r\n\r\n"));
  r = c.read_response(true);
  REQUIRE(r);
  CHECK(r->headers.get_or("Content-Length", "") == "0");
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

TEST_CASE("a connection waiting for its request is closed after client_timeout, one that sends is served") {
  ServerOptions options;
  options.client_timeout = 0.3;
  options.workers = 1;
  TestServer server(echo_handler, options);
  RawClient silent(server.port());    // never sends a byte
  RawClient answered(server.port());  // idles after one request
  REQUIRE(answered.send("GET /a HTTP/1.1\r\n\r\n"));
  REQUIRE(answered.read_response());
  RawClient late(server.port());  // sends its request within client_timeout
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  REQUIRE(late.send("GET /b HTTP/1.1\r\n\r\n"));
  auto r = late.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  // The worker's idle sweep runs every client_timeout / 4: each is closed between 0.3 and
  // ~0.4 s after it began to wait.
  CHECK(silent.closed_by_peer());
  CHECK(answered.closed_by_peer());
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= std::chrono::milliseconds(250));
  CHECK(took < std::chrono::seconds(2));
  auto again = raw_request(server.port(), "GET /c HTTP/1.1\r\n\r\n");
  REQUIRE(again);
  CHECK(again->status == 200);
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
  ServerOptions options;
  options.metrics_bind_port = 0;  // an admin listener on any free port
  TestServer server(echo_handler, options);
  REQUIRE(raw_request(server.port(), "DELETE /x HTTP/1.1\r\n\r\n"));
  // The worker records a request just after its response is written, so the scrape (perhaps
  // on the other worker) may come first; give it a moment.
  const std::string expected =
      "apus_http_requests_total{method=\"DELETE\",server=\"test\",status=\"200\"} 1";
  std::optional<apus::test::RawResponse> r;
  for (int i = 0; i < 100; ++i) {
    r = raw_request(server.server().metrics_port(), "GET /metrics HTTP/1.1\r\n\r\n");
    if (!r || r->body.find(expected) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body.find(expected) != std::string::npos);
  CHECK(r->body.find("apus_http_request_duration_seconds_bucket") != std::string::npos);
  CHECK(r->body.find("apus_accept_queue_depth") != std::string::npos);
}

// ---- issue 12: response splitting -------------------------------------------------------

namespace {

// Answers with a header taken from the request path: /name/<kind> puts CR, LF or NUL in a
// header name, /value/<kind> in a value, /reason in the reason phrase; /stream/... does the same
// through start_response(). Records what respond()/start_response()/write_body() returned.
struct SplitHandler {
  std::atomic<bool> respond_failed{false};
  std::atomic<bool> write_failed{false};

  net::awaitable<void> operator()(Exchange& ex) {
    std::string path(ex.request().path());
    HeaderMap headers;
    std::string reason;
    std::string bad = "x\r\nSet-Cookie: pwned=1";
    if (path.ends_with("/cr")) bad = "a\rb";
    if (path.ends_with("/nul")) bad = std::string("a\0b", 3);
    if (path.find("/name") != std::string::npos) {
      headers.add("X-Evil" + bad, "1");
    } else if (path.find("/value") != std::string::npos) {
      headers.add("X-Evil", bad);
    } else if (path.find("/reason") != std::string::npos) {
      reason = "OK\r\nSet-Cookie: pwned=1";
    }
    headers.add("X-Fine", "yes");
    if (path.starts_with("/stream")) {
      Status s = co_await ex.start_response(200, std::move(headers), std::nullopt);
      if (!s.ok()) respond_failed = true;
      if (!(co_await ex.write_body("body")).ok()) write_failed = true;
      (void)co_await ex.finish_response();
      co_return;
    }
    Response r;
    r.reason = reason;
    r.headers = std::move(headers);
    r.body = "body";
    if (!(co_await ex.respond(std::move(r))).ok()) respond_failed = true;
  }
};

}  // namespace

TEST_CASE("issue 12: a response header holding CR, LF or NUL becomes a 500 and a log line") {
  LogCapture log;
  auto handler = std::make_shared<SplitHandler>();
  TestServer server([handler](Exchange& ex) { return (*handler)(ex); });
  for (std::string path : {"/value/crlf", "/value/cr", "/value/nul", "/name/crlf", "/name/nul",
                           "/reason", "/stream/value/crlf", "/stream/name/nul"}) {
    CAPTURE(path);
    handler->respond_failed = false;
    handler->write_failed = false;
    RawClient c(server.port());
    REQUIRE(c.send("GET " + path + " HTTP/1.1\r\n\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 500);
    CHECK(r->body.empty());
    CHECK(!r->headers.contains("Set-Cookie"));
    CHECK(!r->headers.contains("X-Fine"));
    CHECK(r->headers.get_or("Connection", "") == "close");
    CHECK(c.closed_by_peer());
    CHECK(handler->respond_failed);
    if (path.starts_with("/stream")) CHECK(handler->write_failed);
  }
  // The server goes on serving, and clean headers pass.
  auto ok = raw_request(server.port(), "GET /clean HTTP/1.1\r\n\r\n");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  CHECK(ok->headers.get_or("X-Fine", "") == "yes");
  std::string text = log.text();
  CHECK(text.find("X-Evil") != std::string::npos);
  CHECK(text.find("\\x0d\\x0a") != std::string::npos);  // the bytes, escaped, not raw
  CHECK(text.find("Set-Cookie: pwned=1\n") == std::string::npos);
}

// ---- issue 12: exceptions from handlers --------------------------------------------------

TEST_CASE("issue 12: a handler that throws gets the client a 500 and the server serves on") {
  LogCapture log;
  ServerOptions options;
  options.workers = 1;
  options.drain_timeout = 2;
  auto server = std::make_unique<TestServer>(
      [](Exchange& ex) -> net::awaitable<void> {
        if (ex.request().path() == "/throw") throw std::runtime_error("boom in handler");
        if (ex.request().path() == "/throw-late") {
          (void)co_await ex.start_response(200, {}, std::nullopt);
          (void)co_await ex.write_body("partial");
          throw std::runtime_error("boom mid-response");
        }
        Response r;
        r.body = "fine";
        (void)co_await ex.respond(std::move(r));
      },
      options);
  for (int i = 0; i < 3; ++i) {
    auto r = raw_request(server->port(), "GET /throw HTTP/1.1\r\n\r\n");
    REQUIRE(r);
    CHECK(r->status == 500);
    CHECK(r->headers.get_or("Connection", "") == "close");
  }
  // Mid-response: the client sees the connection close before the chunked body ends.
  RawClient late(server->port());
  REQUIRE(late.send("GET /throw-late HTTP/1.1\r\n\r\n"));
  CHECK(!late.read_response());
  auto r = raw_request(server->port(), "GET /fine HTTP/1.1\r\n\r\n");
  REQUIRE(r);
  CHECK(r->body == "fine");
  for (int i = 0; i < 100 && server->server().open_connections() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(server->server().open_connections() == 0);
  auto start = std::chrono::steady_clock::now();
  server.reset();  // stop(): nothing left to drain
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
  std::string text = log.text();
  CHECK(text.find("GET /throw threw: boom in handler") != std::string::npos);
  CHECK(text.find("boom mid-response") != std::string::npos);
}

TEST_CASE("issue 12: an exception outside the handler closes and unregisters the session") {
  // The access logger runs in the session after the handler; one that throws ends the session
  // coroutine itself, which only spawn_logged's completion sees.
  LogCapture log;
  ServerOptions options;
  options.workers = 1;
  options.drain_timeout = 2;
  apus::common::Metrics metrics("test");
  auto server = std::make_unique<apus::common::http::Server>(
      options, echo_handler, &metrics,
      [](const apus::common::http::RequestRecord&) { throw std::runtime_error("logger broke"); });
  REQUIRE(server->start().ok());
  RawClient c(server->port());
  REQUIRE(c.send("GET /x HTTP/1.1\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(c.closed_by_peer());
  for (int i = 0; i < 100 && server->open_connections() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(server->open_connections() == 0);
  auto start = std::chrono::steady_clock::now();
  server.reset();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
  CHECK(log.text().find("http session: uncaught exception: logger broke") != std::string::npos);
}

// ---- issue 12: max_clients and running out of descriptors --------------------------------

namespace {

// CPU seconds (user + system) the process `pid` has used; -1 if unreadable.
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(close_paren + 2));
  std::string field;
  // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// True if data (or EOF) arrives on `fd` within `ms`.
bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) > 0;
}

// The local address (hex, as /proc/net/tcp writes it) of the socket listening on `port`.
std::string listening_address(uint16_t port) {
  std::ifstream f("/proc/net/tcp");
  std::string line;
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state;
    in >> slot >> local >> remote >> state;
    if (state == "0A" && local.ends_with(want)) return local.substr(0, local.find(':'));
  }
  return "";
}

}  // namespace

TEST_CASE("issue 12: beyond max_clients a connection waits in the backlog until one closes") {
  ServerOptions options;
  options.workers = 1;
  options.max_clients = 2;
  options.metrics_bind_port = 0;
  TestServer server(echo_handler, options);
  auto first = std::make_unique<RawClient>(server.port());
  RawClient second(server.port());
  for (RawClient* c : {first.get(), &second}) {
    REQUIRE(c->send("GET /in HTTP/1.1\r\n\r\n"));
    REQUIRE(c->read_response());
  }
  RawClient third(server.port());  // the kernel completes the handshake into the backlog
  REQUIRE(third.send("GET /third HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(readable_within(third.fd(), 300));
  CHECK(server.server().open_connections() == 2);
  // The admin listener is apart from the cap: metrics can be read while the port is full.
  auto m = raw_request(server.server().metrics_port(), "GET /metrics HTTP/1.1\r\n\r\n");
  REQUIRE(m);
  CHECK(m->status == 200);
  // Waiting for room costs no CPU.
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::getrusage(RUSAGE_SELF, &after);
  auto secs = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  CHECK(secs(after) - secs(before) < 0.3);
  CHECK_FALSE(readable_within(third.fd(), 0));
  first.reset();  // a place frees up: the third is accepted and served
  auto r = third.read_response();
  REQUIRE(r);
  CHECK(r->body == "GET /third");
}

// Sanitizer runtimes need descriptors of their own to report (a pipe to probe memory, a socket
// pair for the symbolizer): out of descriptors, UBSan reads the queue's objects as unreadable
// and reports a false "invalid vptr", so the EMFILE test runs only in plain builds.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizedBuild = true;
#else
constexpr bool kSanitizedBuild = false;
#endif
#else
constexpr bool kSanitizedBuild = false;
#endif

TEST_CASE("issue 12: out of descriptors, the acceptor backs off instead of spinning" *
          doctest::skip(kSanitizedBuild)) {
  // The server runs in a child process whose RLIMIT_NOFILE leaves room for two connections;
  // the parent measures the child's CPU time while a third waits.
  apus::test::TempDir dir("apus_emfile");
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    apus::common::log::configure(
        {.name = "emfile", .level = apus::common::log::Level::kInfo, .file = dir.path("log")});
    ServerOptions options;
    options.bind_ip = "127.0.0.1";
    options.workers = 1;
    apus::common::http::Server server(options, echo_handler);
    if (!server.start().ok()) ::_exit(1);
    // Fill every free descriptor number below the highest open one, then allow two more.
    int highest = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
      while (dirent* e = ::readdir(d)) {
        int fd = std::atoi(e->d_name);
        if (fd != ::dirfd(d)) highest = std::max(highest, fd);
      }
      ::closedir(d);
    }
    for (;;) {
      int fd = ::dup(pipe_fds[1]);
      if (fd < 0) ::_exit(1);
      if (fd > highest) {
        ::close(fd);
        break;
      }
    }
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = static_cast<rlim_t>(highest + 3);
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(1);
    uint16_t port = server.port();
    if (::write(pipe_fds[1], &port, sizeof port) != sizeof port) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  struct KillChild {
    pid_t pid;
    ~KillChild() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } kill_child{pid};
  uint16_t port = 0;
  REQUIRE(readable_within(pipe_fds[0], 10000));
  REQUIRE(::read(pipe_fds[0], &port, sizeof port) == sizeof port);
  ::close(pipe_fds[0]);
  auto child_log = [&] {
    std::ifstream f(dir.path("log"));
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  INFO("child log: " << child_log());

  auto first = std::make_unique<RawClient>(port);
  RawClient second(port);
  for (RawClient* c : {first.get(), &second}) {
    REQUIRE(c->send("GET /in HTTP/1.1\r\n\r\n"));
    REQUIRE(c->read_response());
  }
  RawClient third(port);
  REQUIRE(third.send("GET /third HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(readable_within(third.fd(), 300));
  double cpu_before = cpu_seconds(pid);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  double cpu_after = cpu_seconds(pid);
  REQUIRE(cpu_before >= 0);
  CHECK(cpu_after - cpu_before < 0.25);  // a spinning acceptor burns ~1 s of CPU here
  first.reset();
  auto r = third.read_response();
  REQUIRE(r);
  CHECK(r->body == "GET /third");
  // The child's log lines are written by its log writer thread, after the fact: wait for the
  // episode's last line (a bounded wait; CI machines run other tests beside this one).
  std::string log = child_log();
  for (int i = 0; i < 100 && log.find("accepting again after") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log = child_log();
  }
  size_t failures = 0;
  for (size_t at = log.find("accept failed"); at != std::string::npos;
       at = log.find("accept failed", at + 1)) {
    ++failures;
  }
  CHECK(failures == 1);  // one line per episode, not one per attempt
  CHECK(log.find("accepting again after") != std::string::npos);
}

// ---- issue 12: metrics on the admin listener ---------------------------------------------

TEST_CASE("issue 12: /metrics is served on the admin listener only, bound to loopback") {
  ServerOptions options;
  options.bind_ip = "0.0.0.0";
  options.metrics_bind_port = 0;
  TestServer server(echo_handler, options);
  uint16_t admin = server.server().metrics_port();
  REQUIRE(admin != 0);
  REQUIRE(admin != server.port());
  // On the public port /metrics is an ordinary path: the handler gets it.
  auto pub = raw_request(server.port(), "GET /metrics HTTP/1.1\r\n\r\n");
  REQUIRE(pub);
  CHECK(pub->body == "GET /metrics");
  CHECK(pub->body.find("apus_http_requests_total") == std::string::npos);
  auto m = raw_request(admin, "GET /metrics HTTP/1.1\r\n\r\n");
  REQUIRE(m);
  CHECK(m->status == 200);
  // (A series that exists from start(): the public request above is recorded only after its
  // answer is written, so its own series may not be there yet.)
  CHECK(m->body.find("# TYPE apus_accept_queue_depth gauge") != std::string::npos);
  // The admin listener serves nothing else but /healthcheck.
  auto other = raw_request(admin, "GET /v1/AUTH_a HTTP/1.1\r\n\r\n");
  REQUIRE(other);
  CHECK(other->status == 404);
  auto hc = raw_request(admin, "GET /healthcheck HTTP/1.1\r\n\r\n");
  REQUIRE(hc);
  CHECK(hc->body == "OK");
  CHECK(listening_address(admin) == "0100007F");  // 127.0.0.1, the default metrics_bind_ip
  // No metrics_bind_port, no admin listener.
  TestServer plain(echo_handler);
  CHECK(plain.server().metrics_port() == 0);
  auto none = raw_request(plain.port(), "GET /metrics HTTP/1.1\r\n\r\n");
  REQUIRE(none);
  CHECK(none->body == "GET /metrics");
}

TEST_CASE("issue 12: max_clients and the metrics listener are read from [DEFAULT] or the app") {
  auto conf = apus::common::Config::parse(
      "[DEFAULT]\nmetrics_bind_port = 9100\n\n[app:object-server]\nmax_clients = 7\n"
      "metrics_bind_ip = ::1\n");
  REQUIRE(conf.ok());
  ServerOptions options;
  REQUIRE(apus::common::http::read_runtime_options(conf->section("app:object-server"), &options)
              .ok());
  CHECK(options.max_clients == 7);
  CHECK(options.metrics_bind_ip == "::1");
  CHECK(options.metrics_bind_port == std::optional<uint16_t>(9100));
  auto defaults = apus::common::Config::parse("[app:proxy-server]\n");
  REQUIRE(defaults.ok());
  ServerOptions plain;
  plain.metrics_bind_port = 1;
  REQUIRE(apus::common::http::read_runtime_options(defaults->section("app:proxy-server"), &plain)
              .ok());
  CHECK(plain.max_clients == 1024);
  CHECK(plain.metrics_bind_ip == "127.0.0.1");
  CHECK(!plain.metrics_bind_port);  // 0: no admin listener
  auto bad = apus::common::Config::parse("[app:x]\nmetrics_bind_port = 70000\n");
  REQUIRE(bad.ok());
  CHECK(!apus::common::http::read_runtime_options(bad->section("app:x"), &plain).ok());
}

// ---- issue 12: request header names as Swift's WSGI layer gives them ---------------------

TEST_CASE("issue 12: request header names reach the handler as Swift's WSGI layer spells them") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    for (const auto& [name, value] : ex.request().headers) r.body += name + "=" + value + "\n";
    (void)co_await ex.respond(std::move(r));
  });
  auto r = raw_request(server.port(),
                       "PUT /o HTTP/1.1\r\nX-Object-Meta-under_score: v1\r\n"
                       "x-object-meta-MiXeD_CaSe: v2\r\nX-Object-Meta-dup: a\r\n"
                       "X-Object-Meta-Dup: b\r\nContent_Type: evil/x\r\n"
                       "Content-Length: 0\r\n\r\n");
  REQUIRE(r);
  CHECK(r->body ==
        "X-Object-Meta-Under-Score=v1\nX-Object-Meta-Mixed-Case=v2\nX-Object-Meta-Dup=a,b\n"
        "Content-Length=0\n");
}

TEST_CASE("issue 12: spawn_logged logs an escaped exception with its context and cleans up") {
  LogCapture log;
  net::io_context ioc;
  int cleanups = 0;
  auto thrower = []() -> net::awaitable<int> {
    if (true_at_run_time()) throw std::runtime_error("lost reply");
    co_return 1;
  };
  auto fine = []() -> net::awaitable<void> { co_return; };
  apus::common::spawn_logged(ioc.get_executor(), thrower(), "fan-out to 3 nodes",
                             [&] { ++cleanups; });
  apus::common::spawn_logged(ioc.get_executor(), fine(), "quiet task", [&] { ++cleanups; });
  ioc.run();
  CHECK(cleanups == 1);
  std::string text = log.text();
  CHECK(text.find("fan-out to 3 nodes: uncaught exception: lost reply") != std::string::npos);
  CHECK(text.find("quiet task") == std::string::npos);
}

TEST_CASE("issue 12: reply() answers and ends the handler in one statement") {
  bool after_reply = false;
  TestServer server([&](Exchange& ex) -> net::awaitable<void> {
    if (ex.request().path() == "/refused") {
      co_return co_await ex.reply(Response{403, "", {}, "no"});
    }
    after_reply = true;
    co_return co_await ex.reply(Response{200, "", {}, "yes"});
  });
  RawClient c(server.port());
  REQUIRE(c.send("GET /refused HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK(r->body == "no");
  CHECK_FALSE(after_reply);
}

TEST_CASE("issue 12: OrRefusal holds a value or the response refusing the request") {
  auto parse = [](std::string_view s) -> OrRefusal<int> {
    if (s.empty()) return Response{400, "", {}, "Missing number"};
    return static_cast<int>(s.size());
  };
  OrRefusal<int> good = parse("abc");
  REQUIRE(good.ok());
  CHECK(*good == 3);
  OrRefusal<int> bad = parse("");
  REQUIRE_FALSE(bad);
  CHECK(bad.refusal().status == 400);
  Response moved = std::move(bad).refusal();
  CHECK(moved.body == "Missing number");
}

TEST_CASE("field names beyond RFC tokens arrive as sent, as eventlet takes them") {
  HeaderMap seen;
  std::vector<std::pair<std::string, std::string>> raw;
  TestServer server([&](Exchange& ex) -> net::awaitable<void> {
    seen = ex.request().headers;
    raw = ex.request().raw_headers;
    Response r;
    (void)co_await ex.respond(std::move(r));
  });
  RawClient c(server.port());
  REQUIRE(c.send("GET /o HTTP/1.1\r\nX-Object-Meta-Foo=5Fbar: 1\r\nx-amz-meta-(: 2\r\n"
                 "X-Meta_Under: 3\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(seen.get_or("X-Object-Meta-Foo=5fbar", "") == "1");
  CHECK(seen.get_or("X-Amz-Meta-(", "") == "2");
  CHECK(seen.get_or("X-Meta-Under", "") == "3");
  REQUIRE(raw.size() == 3);
  CHECK(raw[1].first == "x-amz-meta-(");
  CHECK(raw[2].first == "X-Meta_Under");
  // A space in a name is still refused.
  RawClient d(server.port());
  REQUIRE(d.send("GET /o HTTP/1.1\r\nX Bad: 1\r\n\r\n"));
  r = d.read_response();
  REQUIRE(r);
  CHECK(r->status == 400);
}
