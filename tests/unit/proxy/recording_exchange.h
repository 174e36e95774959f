// A test Exchange for middleware unit tests: serves a fixed request with no body and keeps the
// one response sent through it (a whole response, or the head of a streamed one and its body
// as written, chunk by chunk); it can also play a client that went away (writes fail).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"

namespace apus::proxy::testing {

class RecordingExchange final : public common::http::Exchange {
 public:
  explicit RecordingExchange(common::http::Request req = {}) : req_(std::move(req)) {}
  const common::http::Request& request() const override { return req_; }
  boost::asio::awaitable<common::Result<size_t>> read_body(std::span<char>) override {
    co_return 0;
  }
  boost::asio::awaitable<common::Status> send_continue() override { co_return common::Status(); }
  boost::asio::awaitable<common::Status> write_body(std::string_view chunk) override {
    if (fail_writes) co_return common::Status::io_error("client gone");
    chunks.emplace_back(chunk);
    co_return common::Status();
  }
  boost::asio::awaitable<common::Status> finish_response() override {
    finished = true;
    co_return common::Status();
  }
  bool response_started() const override { return response_.has_value(); }
  int response_status() const override { return response_ ? response_->status : 0; }
  std::optional<common::http::Response> response_;
  std::vector<std::string> chunks;  // a streamed body, as written
  bool finished = false;            // the response is complete
  bool fail_writes = false;         // the client went away

  // The body sent: a whole response's, or the chunks written.
  std::string body() const {
    std::string out = response_ ? response_->body : std::string();
    for (const auto& c : chunks) out += c;
    return out;
  }

 protected:
  boost::asio::awaitable<common::Status> do_respond(common::http::Response response) override {
    response_ = std::move(response);
    finished = true;
    co_return common::Status();
  }
  boost::asio::awaitable<common::Status> do_start_response(int status,
                                                           common::http::HeaderMap headers,
                                                           std::optional<uint64_t>) override {
    response_ = common::http::Response{status, "", std::move(headers), ""};
    co_return common::Status();
  }

 private:
  common::http::Request req_;
};

}  // namespace apus::proxy::testing
