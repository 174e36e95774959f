// The backend client against real servers on loopback: pooling, 100-continue, timeouts and
// streaming one body to several peers.
#include "common/http/client.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <set>
#include <thread>

#include "common/io/blocking_pool.h"
#include "tests/support/test_server.h"

namespace net = boost::asio;
using apus::common::Result;
using apus::common::Status;
using apus::common::http::ClientConnection;
using apus::common::http::ClientOptions;
using apus::common::http::ClientRequest;
using apus::common::http::ConnectionPool;
using apus::common::http::Exchange;
using apus::common::http::Response;
using apus::test::TestServer;

namespace {

// Runs one coroutine to completion on `ioc` and returns its result. The io_context must
// outlive the ConnectionPool the coroutine uses (pooled sockets belong to it).
template <class T>
T run(net::io_context& ioc, std::function<net::awaitable<T>()> body) {
  auto future = net::co_spawn(ioc, body(), net::use_future);
  ioc.run();
  ioc.restart();
  return future.get();
}

// Answers with the body length and the client's port, so tests can see connection reuse.
net::awaitable<void> counting_handler(Exchange& ex) {
  std::array<char, 16384> buf;
  uint64_t total = 0;
  for (;;) {
    auto n = co_await ex.read_body(buf);
    if (!n.ok()) co_return;
    if (*n == 0) break;
    total += *n;
  }
  Response r;
  r.status = 201;
  r.headers.set("X-Bytes", std::to_string(total));
  r.headers.set("X-Peer-Port", std::to_string(ex.request().remote_port));
  r.body = "ok";
  (void)co_await ex.respond(std::move(r));
}

// A socket listening on a free loopback port with `backlog`, and the port.
std::pair<int, uint16_t> loopback_listener(int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, backlog) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return {fd, ntohs(addr.sin_port)};
}

}  // namespace

TEST_CASE("simple_request sends a body and reuses the pooled connection") {
  TestServer server(counting_handler);
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  std::set<std::string> ports;
  auto result = run<Status>(ioc, [&]() -> net::awaitable<Status> {
    for (int i = 0; i < 3; ++i) {
      ClientRequest req;
      req.method = "PUT";
      req.target = "/sda/1/a/c/o";
      auto r = co_await apus::common::http::simple_request(pool, "127.0.0.1", server.port(),
                                                           req, "hello world");
      if (!r.ok()) co_return r.status();
      if (r->head.status != 201 || r->body != "ok" ||
          r->head.headers.get_or("X-Bytes", "") != "11") {
        co_return Status::corruption("unexpected response");
      }
      ports.insert(std::string(r->head.headers.get_or("X-Peer-Port", "")));
    }
    co_return Status();
  });
  CHECK(result.ok());
  CHECK(ports.size() == 1);  // one connection, kept alive and reused
}

TEST_CASE(
    "fields of every size arrive whole in requests and answers on one kept-alive connection") {
  // Each field comes out as it went in, both ways, whatever its neighbours' sizes, request
  // after request on one connection (its parsers are made anew for each head).
  auto value_of = [](int request, int field) {
    const size_t sizes[] = {1, 15, 16, 200, 999, 1000, 1001, 3000};
    return std::string(sizes[(request + field) % 8],
                       static_cast<char>('a' + (request * 7 + field) % 26));
  };
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    Response r;
    r.status = 200;
    for (const auto& [name, value] : ex.request().headers) {
      if (name.starts_with("X-Object-Meta-")) r.headers.add("X-Echo-" + name.substr(14), value);
    }
    (void)co_await ex.respond(std::move(r));
  });
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto result = run<Status>(ioc, [&]() -> net::awaitable<Status> {
    for (int i = 0; i < 6; ++i) {
      ClientRequest req;
      req.method = "GET";
      req.target = "/sda/1/a/c/o";
      const int fields = 3 + 11 * i;  // 3 to 58
      for (int f = 0; f < fields; ++f) {
        req.headers.add("X-Object-Meta-F" + std::to_string(f), value_of(i, f));
      }
      auto r = co_await apus::common::http::simple_request(pool, "127.0.0.1", server.port(), req);
      if (!r.ok()) co_return r.status();
      if (r->head.status != 200)
        co_return Status::corruption("status " + std::to_string(r->head.status));
      for (int f = 0; f < fields; ++f) {
        if (r->head.headers.get_or("X-Echo-F" + std::to_string(f), "") != value_of(i, f)) {
          co_return Status::corruption("request " + std::to_string(i) + ": field " +
                                       std::to_string(f));
        }
      }
    }
    co_return Status();
  });
  CHECK_MESSAGE(result.ok(), result.to_string());
}

TEST_CASE("a response head of up to 64 KiB is read, a longer one is an error") {
  // A container HEAD brings all its metadata back: many sysmeta headers of up to 8 KiB each.
  auto handler = [](size_t headers) {
    return [headers](Exchange& ex) -> net::awaitable<void> {
      Response r;
      r.status = 204;
      for (size_t i = 0; i < headers; ++i) {
        r.headers.set("X-Container-Sysmeta-Chunk-" + std::to_string(i), std::string(7000, 'a'));
      }
      (void)co_await ex.respond(std::move(r));
    };
  };
  for (auto [headers, ok] : {std::pair<size_t, bool>{8, true}, {10, false}}) {
    TestServer server(handler(headers));
    net::io_context ioc;
    ConnectionPool pool(ClientOptions{});
    auto result = run<Status>(ioc, [&]() -> net::awaitable<Status> {
      ClientRequest req;
      req.method = "HEAD";
      req.target = "/sda/1/a/c";
      auto r = co_await apus::common::http::simple_request(pool, "127.0.0.1", server.port(), req);
      if (!r.ok()) co_return r.status();
      if (r->head.headers.get_or("X-Container-Sysmeta-Chunk-7", "").size() != 7000) {
        co_return Status::corruption("a header lost");
      }
      co_return Status();
    });
    CHECK(result.ok() == ok);
  }
}

TEST_CASE("Expect: 100-continue returns 100, or the peer's refusal before the body") {
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    if (ex.request().path() == "/refuse") {
      Response r;
      r.status = 507;
      (void)co_await ex.respond(std::move(r));
      co_return;
    }
    co_await counting_handler(ex);
  });
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto statuses = run<std::pair<int, int>>(ioc, [&]() -> net::awaitable<std::pair<int, int>> {
    ClientRequest req;
    req.method = "PUT";
    req.content_length = 3;
    req.expect_continue = true;
    req.target = "/accept";
    auto c1 = co_await pool.connect("127.0.0.1", server.port());
    auto s1 = co_await (*c1)->send_head(req);
    (void)co_await (*c1)->write_body("abc");
    auto h1 = co_await (*c1)->read_response_head();
    req.target = "/refuse";
    auto c2 = co_await pool.connect("127.0.0.1", server.port());
    auto s2 = co_await (*c2)->send_head(req);
    auto h2 = co_await (*c2)->read_response_head();
    co_return std::make_pair(*s1 * 1000 + h1->status, *s2 * 1000 + h2->status);
  });
  CHECK(statuses.first == 100 * 1000 + 201);
  CHECK(statuses.second == 507 * 1000 + 507);
}

TEST_CASE("a refused connection is Unavailable") {
  uint16_t port;
  {
    TestServer server(counting_handler);
    port = server.port();
  }  // nothing listens there now
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto s = run<Status>(ioc, [&]() -> net::awaitable<Status> {
    auto c = co_await pool.connect("127.0.0.1", port);
    co_return c.status();
  });
  CHECK(s.code() == Status::Code::kUnavailable);
}

TEST_CASE("a peer that never completes the handshake is Timeout after conn_timeout") {
  // A listener with a full accept queue that never accepts: Linux drops further SYNs, so a new
  // connection hangs in the handshake, as with a dead host.
  const std::pair<int, uint16_t> listening = loopback_listener(0);
  const int fd = listening.first;
  const uint16_t port = listening.second;
  net::io_context ioc;
  ClientOptions options;
  options.conn_timeout = 0.2;
  ConnectionPool pool(options);
  auto outcome = run<std::pair<Status, double>>(
      ioc, [&]() -> net::awaitable<std::pair<Status, double>> {
        // The first connections fill the accept queue; keep them open.
        std::vector<std::unique_ptr<ClientConnection>> held;
        for (int i = 0; i < 8; ++i) {
          auto start = std::chrono::steady_clock::now();
          auto c = co_await pool.connect("127.0.0.1", port);
          double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (!c.ok()) co_return std::make_pair(c.status(), took);
          held.push_back(std::move(*c));
        }
        co_return std::make_pair(Status(), 0.0);
      });
  ::close(fd);
  CHECK(outcome.first.is_timeout());
  CHECK(outcome.second >= 0.19);
  CHECK(outcome.second < 2.0);
}

TEST_CASE("a chunked response whose last chunk's line ends one read is read once the rest comes") {
  // As the server's request side: after "0\r\n" the parser waits for more, and is not given
  // the same bytes again.
  for (std::string_view chunks : {"0\r\n", "5\r\nhello\r\n0\r\n"}) {
    CAPTURE(chunks);
    const std::pair<int, uint16_t> listening = loopback_listener(4);
    const int fd = listening.first;
    const uint16_t port = listening.second;
    std::thread peer([fd, chunks] {
      const int conn = ::accept(fd, nullptr, nullptr);
      if (conn < 0) return;
      std::array<char, 4096> request;
      (void)::recv(conn, request.data(), request.size(), 0);
      const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
      (void)::send(conn, (head + std::string(chunks)).data(), head.size() + chunks.size(), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the client has read it
      (void)::send(conn, "\r\n", 2, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::close(conn);
    });
    net::io_context ioc;
    ConnectionPool pool(ClientOptions{});
    auto body = run<std::optional<std::string>>(
        ioc, [&]() -> net::awaitable<std::optional<std::string>> {
          auto r = co_await apus::common::http::simple_request(pool, "127.0.0.1", port,
                                                               ClientRequest{});
          if (!r.ok()) co_return std::nullopt;
          co_return r->body;
        });
    peer.join();
    ::close(fd);
    REQUIRE(body);
    CHECK(*body == (chunks.size() > 3 ? "hello" : ""));
  }
}

TEST_CASE("a peer slower than node_timeout is Timeout") {
  apus::common::io::BlockingPool disk("disk", 1);
  TestServer server([&](Exchange& ex) -> net::awaitable<void> {
    co_await disk.run([] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
    Response r;
    (void)co_await ex.respond(std::move(r));
  });
  ClientOptions options;
  options.node_timeout = 0.1;
  net::io_context ioc;
  ConnectionPool pool(options);
  auto s = run<Status>(ioc, [&]() -> net::awaitable<Status> {
    auto r = co_await apus::common::http::simple_request(pool, "127.0.0.1", server.port(),
                                                         ClientRequest{});
    co_return r.status();
  });
  CHECK(s.is_timeout());
}

TEST_CASE("start_request reads the head of a bodyless request, and stops at 100 for Expect") {
  TestServer server(counting_handler);
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto statuses = run<std::vector<int>>(ioc, [&]() -> net::awaitable<std::vector<int>> {
    std::vector<int> out;
    ClientRequest get;
    get.target = "/sda/1/a/c/o";
    auto begun = co_await apus::common::http::start_request(pool, ClientOptions{}, "127.0.0.1",
                                                            server.port(), get);
    if (!begun.ok()) co_return out;
    out.push_back(begun->status);
    auto head = co_await begun->conn->read_response_head();  // the same head again
    out.push_back(head.ok() ? head->status : -1);
    (void)co_await begun->conn->read_body_all(16);
    pool.release(std::move(begun->conn));
    ClientRequest put;
    put.method = "PUT";
    put.target = "/sda/1/a/c/o";
    put.content_length = 5;
    put.expect_continue = true;
    auto upload = co_await apus::common::http::start_request(pool, ClientOptions{}, "127.0.0.1",
                                                             server.port(), put);
    if (!upload.ok()) co_return out;
    out.push_back(upload->status);
    (void)co_await upload->conn->write_body("12345");
    auto done = co_await upload->conn->read_response_head();
    out.push_back(done.ok() ? std::atoi(std::string(done->headers.get_or("X-Bytes", "")).c_str())
                            : -1);
    co_return out;
  });
  CHECK(statuses == std::vector<int>{201, 201, 100, 5});
}

TEST_CASE("write_body sends pieces as chunks and ends the body once, and the connection goes on") {
  // Echoes the body it read, and how many reads gave bytes.
  TestServer server([](Exchange& ex) -> net::awaitable<void> {
    std::array<char, 16384> buf;
    Response r;
    r.status = 201;
    int reads = 0;
    for (;;) {
      auto n = co_await ex.read_body(buf);
      if (!n.ok() || *n == 0) break;
      ++reads;
      r.body.append(buf.data(), *n);
    }
    r.headers.set("X-Reads", std::to_string(reads));
    (void)co_await ex.respond(std::move(r));
  });
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto bodies = run<std::vector<std::string>>(
      ioc, [&]() -> net::awaitable<std::vector<std::string>> {
        std::vector<std::string> out;
        auto c = co_await pool.connect("127.0.0.1", server.port());
        if (!c.ok()) co_return out;
        ClientRequest req;
        req.method = "PUT";
        req.target = "/sda/1/a/c/o";
        req.chunked = true;
        for (int round = 0; round < 2; ++round) {
          if (!(co_await (*c)->send_head(req)).ok()) co_return out;
          // An empty piece is skipped: as a chunk of its own it would end the body.
          std::array<std::string_view, 4> pieces{"--preamble\r\n", "", std::string_view("body"),
                                                 "--footer--"};
          if (!(co_await (*c)->write_body(pieces, true)).ok()) co_return out;
          if (!(co_await (*c)->finish_body()).ok()) co_return out;  // nothing more to send
          auto head = co_await (*c)->read_response_head();
          if (!head.ok()) co_return out;
          auto body = co_await (*c)->read_body_all(1024);
          out.push_back(std::string(head->headers.get_or("X-Reads", "")) + " " +
                        (body.ok() ? *body : "?"));
        }
        out.push_back((*c)->reusable() ? "reusable" : "not reusable");
        co_return out;
      });
  // The pieces arrive together, so the server's one read takes all three chunks.
  CHECK(bodies == std::vector<std::string>{"1 --preamble\r\nbody--footer--",
                                           "1 --preamble\r\nbody--footer--", "reusable"});
}

TEST_CASE("write_body with more pieces than one write takes sends them all, in order") {
  TestServer server(counting_handler);
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto bytes = run<std::string>(ioc, [&]() -> net::awaitable<std::string> {
    auto c = co_await pool.connect("127.0.0.1", server.port());
    if (!c.ok()) co_return "no connection";
    ClientRequest req;
    req.method = "PUT";
    req.target = "/sda/1/a/c/o";
    req.chunked = true;
    if (!(co_await (*c)->send_head(req)).ok()) co_return "no head";
    std::vector<std::string> owned;
    for (int i = 0; i < 40; ++i) owned.push_back(std::string(static_cast<size_t>(i + 1), 'x'));
    std::vector<std::string_view> pieces(owned.begin(), owned.end());
    if (!(co_await (*c)->write_body(pieces, true)).ok()) co_return "write failed";
    auto head = co_await (*c)->read_response_head();
    if (!head.ok()) co_return "no answer";
    (void)co_await (*c)->read_body_all(64);
    co_return std::string(head->headers.get_or("X-Bytes", ""));
  });
  CHECK(bytes == std::to_string(40 * 41 / 2));
}

TEST_CASE("a body sent without Expect goes out with its head in one write") {
  // A peer that takes one read, then the rest of the request, and answers: its first read
  // must hold the head and the body (sent in two writes, the first read would be the head
  // alone, since this peer waits in recv() before the client writes).
  const std::pair<int, uint16_t> listening = loopback_listener(4);
  const int listener = listening.first;
  const uint16_t port = listening.second;
  std::vector<std::string> first_reads;
  std::thread peer([&] {
    for (std::string_view end : {std::string_view("hello world"), std::string_view("0\r\n\r\n")}) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::array<char, 4096> buf;
      ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      std::string got(buf.data(), n > 0 ? static_cast<size_t>(n) : 0);
      first_reads.push_back(got);
      while (n > 0 && got.find(end) == std::string::npos) {
        n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n > 0) got.append(buf.data(), static_cast<size_t>(n));
      }
      constexpr std::string_view kAnswer = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
      (void)::send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  });
  net::io_context ioc;
  ConnectionPool pool(ClientOptions{});
  auto statuses = run<std::vector<int>>(ioc, [&]() -> net::awaitable<std::vector<int>> {
    std::vector<int> out;
    ClientRequest req;
    req.method = "PUT";
    req.target = "/sda/1/a/c/o";
    auto fixed = co_await apus::common::http::simple_request(pool, "127.0.0.1", port, req,
                                                             "hello world");
    out.push_back(fixed.ok() ? fixed->head.status : 0);
    req.chunked = true;
    auto started = co_await apus::common::http::start_request(pool, ClientOptions{}, "127.0.0.1",
                                                              port, req);
    if (!started.ok()) co_return out;
    std::array<std::string_view, 2> pieces{"--preamble\r\n", "body"};
    if (!(co_await started->conn->write_body(pieces, true)).ok()) co_return out;
    auto head = co_await started->conn->read_response_head();
    out.push_back(head.ok() ? head->status : 0);
    co_return out;
  });
  peer.join();
  ::close(listener);
  CHECK(statuses == std::vector<int>{201, 201});
  REQUIRE(first_reads.size() == 2);
  CHECK(first_reads[0].find("Content-Length: 11\r\n") != std::string::npos);
  CHECK(first_reads[0].ends_with("\r\n\r\nhello world"));
  CHECK(first_reads[0].find("Expect") == std::string::npos);
  CHECK(first_reads[1].find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  // The pieces of one write go as one chunk.
  CHECK(first_reads[1].ends_with("\r\n\r\n10\r\n--preamble\r\nbody\r\n0\r\n\r\n"));
}
