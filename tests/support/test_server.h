// Test support for the runtime: a server on 127.0.0.1 port 0 with a given handler, and a small
// blocking raw-socket client for sending exact bytes (including malformed ones) and reading
// the answers. Everything here stops what it starts in its destructor.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/http/server.h"
#include "common/metrics/metrics.h"

namespace apus::test {

// A started Server owning its Metrics. Stops in the destructor.
class TestServer {
 public:
  explicit TestServer(common::http::Handler handler, common::http::ServerOptions options = {});
  ~TestServer();
  uint16_t port() const { return server_->port(); }
  common::http::Server& server() { return *server_; }
  common::Metrics& metrics() { return metrics_; }

 private:
  common::Metrics metrics_{"test"};
  std::unique_ptr<common::http::Server> server_;
};

// A parsed response as RawClient reads it.
struct RawResponse {
  int status = 0;
  std::string reason;
  common::http::HeaderMap headers;
  std::string body;
};

// A blocking TCP client on 127.0.0.1. Thread-compatible.
class RawClient {
 public:
  // Connects to 127.0.0.1:port; CHECK-fails the test if it cannot.
  explicit RawClient(uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~RawClient();
  RawClient(RawClient&& other) noexcept;
  RawClient(const RawClient&) = delete;

  bool send(std::string_view bytes);
  // Reads one response (Content-Length, chunked, or until close when neither). nullopt when
  // the connection closed or timed out before a full response.
  std::optional<RawResponse> read_response(bool head_request = false);
  // True if the server closed the connection (EOF) within the timeout.
  bool closed_by_peer();
  int fd() const { return fd_; }

 private:
  bool fill();  // reads more bytes into buffer_; false on EOF/timeout
  std::optional<std::string> read_line();
  int fd_ = -1;
  std::string buffer_;
};

// A whole request over a fresh connection; for the simple cases.
std::optional<RawResponse> raw_request(uint16_t port, const std::string& request);

}  // namespace apus::test
