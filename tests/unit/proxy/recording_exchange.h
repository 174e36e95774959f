// A test Exchange for middleware unit tests: serves a fixed request with no body and keeps the
// one response sent through it (a whole response, or the head of a streamed one).
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"

namespace apus::proxy::testing {

class RecordingExchange final : public common::http::Exchange {
 public:
  explicit RecordingExchange(common::http::Request req) : req_(std::move(req)) {}
  const common::http::Request& request() const override { return req_; }
  boost::asio::awaitable<common::Result<size_t>> read_body(std::span<char>) override {
    co_return 0;
  }
  boost::asio::awaitable<common::Status> send_continue() override { co_return common::Status(); }
  boost::asio::awaitable<common::Status> write_body(std::string_view) override {
    co_return common::Status();
  }
  boost::asio::awaitable<common::Status> finish_response() override {
    co_return common::Status();
  }
  bool response_started() const override { return response_.has_value(); }
  int response_status() const override { return response_ ? response_->status : 0; }
  std::optional<common::http::Response> response_;

 protected:
  boost::asio::awaitable<common::Status> do_respond(common::http::Response response) override {
    response_ = std::move(response);
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
