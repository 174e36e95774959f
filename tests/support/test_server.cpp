#include "tests/support/test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace apus::test {

TestServer::TestServer(common::http::Handler handler, common::http::ServerOptions options) {
  options.bind_ip = "127.0.0.1";
  options.bind_port = 0;
  server_ = std::make_unique<common::http::Server>(options, std::move(handler), &metrics_);
  common::Status s = server_->start();
  if (!s.ok()) throw std::runtime_error("test server failed to start: " + s.to_string());
}

TestServer::~TestServer() { server_->stop(); }

RawClient::RawClient(uint16_t port, std::chrono::milliseconds timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error(std::string("connect failed: ") + std::strerror(errno));
  }
}

RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

RawClient::RawClient(RawClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)) {}

bool RawClient::send(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawClient::fill() {
  char buf[65536];
  ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) return false;
  buffer_.append(buf, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> RawClient::read_line() {
  for (;;) {
    auto eol = buffer_.find("\r\n");
    if (eol != std::string::npos) {
      std::string line = buffer_.substr(0, eol);
      buffer_.erase(0, eol + 2);
      return line;
    }
    if (!fill()) return std::nullopt;
  }
}

std::optional<RawResponse> RawClient::read_response(bool head_request) {
  RawResponse r;
  for (;;) {
    auto status_line = read_line();
    if (!status_line) return std::nullopt;
    // "HTTP/1.1 200 OK"
    if (status_line->size() < 12) return std::nullopt;
    r.status = std::atoi(status_line->substr(9, 3).c_str());
    r.reason = status_line->size() > 13 ? status_line->substr(13) : "";
    r.headers.clear();
    for (;;) {
      auto line = read_line();
      if (!line) return std::nullopt;
      if (line->empty()) break;
      auto colon = line->find(':');
      if (colon == std::string::npos) return std::nullopt;
      size_t v = colon + 1;
      while (v < line->size() && (*line)[v] == ' ') ++v;
      r.headers.add(line->substr(0, colon), line->substr(v));
    }
    if (r.status != 100) break;  // skip interim responses
  }
  if (head_request || r.status == 204 || r.status == 304) return r;
  if (auto te = r.headers.get("Transfer-Encoding"); te && *te == "chunked") {
    for (;;) {
      auto size_line = read_line();
      if (!size_line) return std::nullopt;
      size_t size = std::strtoul(size_line->c_str(), nullptr, 16);
      while (buffer_.size() < size + 2) {
        if (!fill()) return std::nullopt;
      }
      r.body.append(buffer_, 0, size);
      buffer_.erase(0, size + 2);
      if (size == 0) return r;
    }
  }
  if (auto cl = r.headers.get("Content-Length")) {
    size_t size = std::strtoul(std::string(*cl).c_str(), nullptr, 10);
    while (buffer_.size() < size) {
      if (!fill()) return std::nullopt;
    }
    r.body = buffer_.substr(0, size);
    buffer_.erase(0, size);
    return r;
  }
  while (fill()) {
  }
  r.body = std::move(buffer_);
  buffer_.clear();
  return r;
}

bool RawClient::closed_by_peer() {
  char c;
  ssize_t n = ::recv(fd_, &c, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

std::optional<RawResponse> raw_request(uint16_t port, const std::string& request) {
  RawClient c(port);
  if (!c.send(request)) return std::nullopt;
  return c.read_response(request.starts_with("HEAD "));
}

}  // namespace apus::test
