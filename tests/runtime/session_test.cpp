// Bad input on a connection: each gets Swift's status (or a closed connection) and the server
// keeps serving others.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>

#include "common/http/server.h"
#include "common/thread_annotations.h"
#include "tests/support/test_server.h"

namespace net = boost::asio;
using apus::common::Status;
using apus::common::http::Exchange;
using apus::common::http::Response;
using apus::common::http::ServerOptions;
using apus::test::RawClient;
using apus::test::raw_request;
using apus::test::TestServer;

namespace {

// Reads the whole body and answers 201, or the status matching the read error; records the
// last error seen.
struct BodyReader {
  apus::common::Mutex mutex;
  // Written by the worker, read by the test.
  std::string error_seen APUS_GUARDED_BY(mutex);
  std::string last_error() {
    apus::common::MutexLock lock(&mutex);
    return error_seen;
  }
  apus::common::http::Handler handler() {
    return [this](Exchange& ex) -> net::awaitable<void> {
      std::array<char, 4096> buf;
      for (;;) {
        auto n = co_await ex.read_body(buf);
        if (!n.ok()) {
          {
            apus::common::MutexLock lock(&mutex);
            error_seen = n.status().to_string();
          }
          Response r;
          r.status = n.status().code() == Status::Code::kInvalidArgument ? 400 : 499;
          (void)co_await ex.respond(std::move(r));
          co_return;
        }
        if (*n == 0) break;
      }
      Response r;
      r.status = 201;
      (void)co_await ex.respond(std::move(r));
    };
  }
};

bool still_serving(uint16_t port) {
  auto r = raw_request(port, "GET /ok HTTP/1.1\r\n\r\n");
  return r && r->status == 201;
}

}  // namespace

TEST_CASE("a header line of 8192 bytes or more gets 400 Header Line Too Long") {
  BodyReader reader;
  TestServer server(reader.handler());
  // "X-Long: " + value + CRLF == 8192 bytes
  std::string value(8192 - 8 - 2, 'v');
  RawClient c(server.port());
  REQUIRE(c.send("GET /x HTTP/1.1\r\nX-Long: " + value + "\r\n\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->reason == "Header Line Too Long");
  CHECK(c.closed_by_peer());
  // One byte shorter is fine.
  auto ok = raw_request(server.port(), "GET /x HTTP/1.1\r\nX-Long: " + value.substr(1) + "\r\n\r\n");
  REQUIRE(ok);
  CHECK(ok->status == 201);
}

TEST_CASE("too many headers get 431") {
  BodyReader reader;
  TestServer server(reader.handler());
  std::string req = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 202; ++i) req += "X-H" + std::to_string(i) + ": v\r\n";
  auto r = raw_request(server.port(), req + "\r\n");
  REQUIRE(r);
  CHECK(r->status == 431);
  // 201 headers are accepted.
  req = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 201; ++i) req += "X-H" + std::to_string(i) + ": v\r\n";
  auto ok = raw_request(server.port(), req + "\r\n");
  REQUIRE(ok);
  CHECK(ok->status == 201);
}

TEST_CASE("more than 64 KiB of headers gets 400 Headers Too Large") {
  BodyReader reader;
  TestServer server(reader.handler());
  std::string req = "GET /x HTTP/1.1\r\n";
  for (int i = 0; i < 20; ++i) req += "X-H" + std::to_string(i) + ": " + std::string(4000, 'a') + "\r\n";
  auto r = raw_request(server.port(), req + "\r\n");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(r->reason == "Headers Too Large");
  CHECK(still_serving(server.port()));
}

TEST_CASE("a request line of 8192 bytes or more gets 414") {
  BodyReader reader;
  TestServer server(reader.handler());
  auto r = raw_request(server.port(), "GET /" + std::string(8200, 'p') + " HTTP/1.1\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 414);
  auto huge = raw_request(server.port(), "GET /" + std::string(100000, 'p') + " HTTP/1.1\r\n\r\n");
  REQUIRE(huge);
  CHECK(huge->status == 414);
  CHECK(still_serving(server.port()));
}

TEST_CASE("a bad Content-Length gets 400") {
  BodyReader reader;
  TestServer server(reader.handler());
  auto r = raw_request(server.port(), "PUT /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 400);
  auto neg = raw_request(server.port(), "PUT /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
  REQUIRE(neg);
  CHECK(neg->status == 400);
  CHECK(still_serving(server.port()));
}

TEST_CASE("garbage instead of a request gets 400") {
  BodyReader reader;
  TestServer server(reader.handler());
  auto r = raw_request(server.port(), "\x01\x02 nonsense\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(still_serving(server.port()));
}

TEST_CASE("bad chunked encoding reaches the handler as InvalidArgument and closes") {
  BodyReader reader;
  TestServer server(reader.handler());
  RawClient c(server.port());
  REQUIRE(c.send("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"));
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(reader.last_error().starts_with("InvalidArgument"));
  CHECK(c.closed_by_peer());
  CHECK(still_serving(server.port()));
}

TEST_CASE("a chunked body whose last chunk's line ends one read is read once the rest comes") {
  // The parser asks for more after "0\r\n" and must not be given the same bytes again (Beast
  // asserts on that): with no chunk before it, and after one.
  for (std::string_view chunks : {"0\r\n", "5\r\nhello\r\n0\r\n"}) {
    CAPTURE(chunks);
    BodyReader reader;
    TestServer server(reader.handler());
    RawClient c(server.port());
    REQUIRE(c.send("PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(chunks)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the server has read it all
    REQUIRE(c.send("\r\n"));
    auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 201);
    CHECK(reader.last_error().empty());
  }
}

TEST_CASE("a truncated body reaches the handler as Cancelled") {
  BodyReader reader;
  TestServer server(reader.handler());
  {
    RawClient c(server.port());
    REQUIRE(c.send("PUT /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\nonly-a-little"));
    ::shutdown(c.fd(), SHUT_WR);
    auto r = c.read_response();
    // The client went away half-way; whatever it reads, the handler saw a cancelled body.
    (void)r;
  }
  for (int i = 0; i < 100 && reader.last_error().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(reader.last_error().starts_with("Cancelled"));
  CHECK(still_serving(server.port()));
}

TEST_CASE("a slowloris client is cut off after client_timeout and others are served") {
  BodyReader reader;
  ServerOptions options;
  options.client_timeout = 0.5;
  options.workers = 1;
  TestServer server(reader.handler(), options);
  RawClient slow(server.port());
  REQUIRE(slow.send("GET /x HTTP/1.1\r\nX-A: 1\r\n"));
  // While it dawdles, others are served at once.
  CHECK(still_serving(server.port()));
  auto start = std::chrono::steady_clock::now();
  // Keep trickling header bytes: the whole head must still arrive within client_timeout.
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed = !slow.send("X");
  }
  if (!closed) closed = slow.closed_by_peer();
  CHECK(closed);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(still_serving(server.port()));
}

TEST_CASE("a body slower than client_timeout gets Timeout and the connection closes") {
  BodyReader reader;
  ServerOptions options;
  options.client_timeout = 0.3;
  TestServer server(reader.handler(), options);
  RawClient c(server.port());
  REQUIRE(c.send("PUT /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
  // The timed-out socket is closed at once (Beast's tcp_stream), so no 408 reaches the client.
  CHECK(c.closed_by_peer());
  for (int i = 0; i < 100 && reader.last_error().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(reader.last_error().starts_with("Timeout"));
  CHECK(still_serving(server.port()));
}
