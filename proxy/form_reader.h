// A multipart/form-data request body read through multipart::Parser as it arrives (formpost,
// and s3api's POST uploads): the first boundary, each part's header lines, and its data, a
// chunk of the client's body at a time, so memory stays bounded whatever the form's size.
//
// Thread-compatible: it belongs to the request's coroutine.
#pragma once

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/status.h"
#include "proxy/multipart.h"

namespace apus::proxy::multipart {

class FormReader {
 public:
  // Bytes asked of the client at a time.
  static constexpr size_t kReadChunk = 64 * 1024;

  FormReader(common::http::Exchange& ex, std::string_view boundary)
      : ex_(ex), parser_(boundary), chunk_(kReadChunk) {}

  // kReady or kInvalid; a failed Status when the client's body could not be read.
  boost::asio::awaitable<common::Result<Parser::Step>> start() {
    while (true) {
      Parser::Step s = parser_.start();
      if (s != Parser::Step::kNeedMore) co_return s;
      APUS_CO_RETURN_IF_ERROR(co_await fill());
    }
  }

  // kReady (lines set) or kTooLong.
  boost::asio::awaitable<common::Result<Parser::Step>> headers(std::vector<std::string>* lines) {
    while (true) {
      Parser::Step s = parser_.read_headers(lines);
      if (s != Parser::Step::kNeedMore) co_return s;
      APUS_CO_RETURN_IF_ERROR(co_await fill());
    }
  }

  // Up to buf.size() bytes of the current part, 0 at its end.
  boost::asio::awaitable<common::Result<size_t>> read(std::span<char> buf) {
    while (true) {
      std::string_view data;
      Parser::Step s = parser_.read_data(buf.size(), &data);
      if (s == Parser::Step::kEnd) co_return size_t{0};
      if (s == Parser::Step::kReady) {
        std::copy(data.begin(), data.end(), buf.begin());
        co_return data.size();
      }
      APUS_CO_RETURN_IF_ERROR(co_await fill());
    }
  }

  // Reads what is left of the current part.
  boost::asio::awaitable<common::Status> drain() {
    std::vector<char> scratch(kReadChunk);
    while (true) {
      auto n = co_await read(scratch);
      if (!n.ok()) co_return n.status();
      if (*n == 0) co_return common::Status();
    }
  }

  bool more_parts() const { return parser_.more_parts(); }

 private:
  boost::asio::awaitable<common::Status> fill() {
    if (parser_.finished()) co_return common::Status::invalid_argument("multipart parser stalled");
    const size_t want = std::min(parser_.room(), chunk_.size());
    if (want == 0) co_return common::Status::invalid_argument("multipart parser buffer full");
    auto n = co_await ex_.read_body(std::span(chunk_.data(), want));
    if (!n.ok()) co_return n.status();
    if (*n == 0) {
      parser_.finish();
    } else {
      parser_.feed(std::string_view(chunk_.data(), *n));
    }
    co_return common::Status();
  }

  common::http::Exchange& ex_;
  Parser parser_;
  std::vector<char> chunk_;
};

}  // namespace apus::proxy::multipart
