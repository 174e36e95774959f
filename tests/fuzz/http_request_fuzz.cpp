// Fuzzes the request path every Apus server runs before and around its handler: the session
// of common/http/internal/server.cpp (Beast's parser with Swift's limits, request line and
// header checks, keep-alive, pipelining, Expect: 100-continue, chunked and Content-Length body
// framing, the response writer), with exactly the bytes a client sends.
//
// The session reads from a real socket, so the target runs one in-process Server on
// 127.0.0.1 (port 0, one worker) for the whole run and, for each input, connects, writes the
// input, half-closes and reads until the server closes. Coverage from the worker thread counts
// like any other. The handler reads every body to its end and answers in one of the three
// ways handlers do (whole, streamed with a length, streamed chunked), chosen by the path.
//
// Input: raw bytes on the connection, usually one or more requests.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/http/server.h"
#include "common/http/url.h"

namespace net = boost::asio;
namespace http = apus::common::http;

namespace {

// The proxy rewrites client queries (format=json for the backends, a shard's marker): the
// field named comes once, last, with the value given; the client's other fields stay as they
// were. Aborts (a fuzzer finding) otherwise.
void check_query_rewrite(std::string_view query) {
  const std::string value = "m\xc3\xa9/&=+ %";
  auto fields = http::parse_query(http::with_query_param(query, "marker", value));
  auto kept = http::parse_query(query);
  std::erase_if(kept, [](const auto& f) { return f.first == "marker"; });
  kept.emplace_back("marker", value);
  if (fields != kept) std::abort();
}

net::awaitable<void> handle(http::Exchange& ex) {
  const http::Request& req = ex.request();
  (void)http::parse_query(req.query());
  check_query_rewrite(req.query());
  std::array<char, 4096> buf;
  uint64_t total = 0;
  for (;;) {
    auto n = co_await ex.read_body(buf);
    if (!n.ok()) {
      http::Response r;
      r.status = n.status().code() == apus::common::Status::Code::kInvalidArgument ? 400 : 499;
      (void)co_await ex.respond(std::move(r));
      co_return;
    }
    if (*n == 0) break;
    total += *n;
  }
  std::string body = req.method + " " + std::to_string(total) + "\n";
  std::string_view path = req.path();
  if (path.starts_with("/chunked") || path.starts_with("/length")) {
    http::HeaderMap headers;
    headers.set("Content-Type", "text/plain");
    std::optional<uint64_t> length;
    if (path.starts_with("/length")) length = body.size() * 2;
    if (!(co_await ex.start_response(200, std::move(headers), length)).ok()) co_return;
    if (!(co_await ex.write_body(body)).ok()) co_return;
    if (!(co_await ex.write_body(body)).ok()) co_return;
    (void)co_await ex.finish_response();
    co_return;
  }
  http::Response r;
  r.status = 201;
  r.headers.set("Content-Type", "text/plain");
  r.body = std::move(body);
  (void)co_await ex.respond(std::move(r));
}

// Never stopped or freed: the process ends with the run. A global, so LeakSanitizer (which
// libFuzzer runs after inputs that allocate more than they free) sees it reachable.
http::Server* g_server = nullptr;

uint16_t server_port() {
  if (!g_server) {
    http::ServerOptions o;
    o.bind_ip = "127.0.0.1";
    o.workers = 1;
    o.client_timeout = 5;
    o.drain_timeout = 1;
    g_server = new http::Server(o, handle);
    if (auto s = g_server->start(); !s.ok()) {
      std::fprintf(stderr, "http_request_fuzz: cannot start the server: %s\n",
                   s.to_string().c_str());
      std::abort();
    }
  }
  return g_server->port();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)server_port();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::perror("http_request_fuzz: socket");
    std::abort();
  }
  // The client half-closes first, so each connection leaves a TIME_WAIT behind for a minute
  // (the reset on close below comes too late to undo that). At 1,500 inputs a second one source address
  // runs out of ephemeral ports within 20 s where the kernel does not reuse TIME_WAIT ports
  // (tcp_tw_reuse=0, as in some CI containers), and connect() then blocks. So the source
  // address rotates through 127.0.0.2-127.0.0.251, the port picked at connect() time.
  static uint32_t next_source = 0;
  int one = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  source.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + next_source++ % 250);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0) {
    std::perror("http_request_fuzz: bind");
    std::abort();
  }
  // The server closes every connection within client_timeout (5 s) of the client going quiet;
  // one still open after 20 s is a hang.
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("http_request_fuzz: connect");
    std::abort();
  }
  size_t sent = 0;
  while (sent < size) {
    // The server may answer and close before taking everything (a rejected head): then the
    // rest of the input is moot.
    ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::array<char, 65536> buf;
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      std::fprintf(stderr, "http_request_fuzz: the server did not close the connection\n");
      std::abort();
    }
    break;  // closed, or reset after a refusal
  }
  // Reset instead of a FIN handshake where the server has not closed yet (it answered and
  // lingers), so the server frees the connection at once.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  ::close(fd);
  return 0;
}
