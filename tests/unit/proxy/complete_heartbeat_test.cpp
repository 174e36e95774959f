// s3api's heartbeats for a slow CompleteMultipartUpload (proxy/s3api/s3_request.h,
// with_heartbeat()): a quick answer is handed back untouched; a slow one goes out as a 200 with
// the XML declaration first, spaces while waiting, then the document without its declaration
// (an error's after a newline); a client gone meanwhile leaves `work` to finish.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/http/server.h"
#include "proxy/s3api/s3_request.h"
#include "tests/unit/proxy/recording_exchange.h"

namespace {

namespace net = boost::asio;
using apus::common::http::Response;
using apus::proxy::testing::RecordingExchange;
using namespace std::chrono_literals;

// An answer after `delay`, with a document as s3api writes them.
std::function<net::awaitable<Response>()> answer_after(std::chrono::milliseconds delay,
                                                        int status, bool* ran) {
  return [=]() -> net::awaitable<Response> {
    net::steady_timer t(co_await net::this_coro::executor);
    t.expires_after(delay);
    co_await t.async_wait(net::use_awaitable);
    *ran = true;
    Response r;
    r.status = status;
    r.body = "<?xml version='1.0' encoding='UTF-8'?>\n<Doc>" + std::to_string(status) + "</Doc>";
    co_return r;
  };
}

std::optional<Response> run(RecordingExchange& ex, std::function<net::awaitable<Response>()> work) {
  net::io_context ioc;
  auto done = net::co_spawn(
      ioc, apus::proxy::s3api::with_heartbeat(ex, "tx1", std::move(work), 50ms, 20ms),
      net::use_future);
  ioc.run();
  return done.get();
}

}  // namespace

TEST_CASE("complete heartbeat: a quick answer is the caller's to send") {
  RecordingExchange ex;
  bool ran = false;
  auto answer = run(ex, answer_after(1ms, 200, &ran));
  REQUIRE(answer);
  CHECK(answer->status == 200);
  CHECK(ran);
  CHECK(ex.response_status() == 0);
  CHECK(ex.chunks.empty());
}

TEST_CASE("complete heartbeat: a slow answer goes out after spaces") {
  RecordingExchange ex;
  bool ran = false;
  auto answer = run(ex, answer_after(150ms, 200, &ran));
  CHECK_FALSE(answer);
  CHECK(ran);
  CHECK(ex.response_status() == 200);
  CHECK(ex.response_->headers.get_or("Content-Type", "") == "application/xml");
  CHECK(ex.response_->headers.get_or("x-amz-request-id", "") == "tx1");
  const std::string decl = "<?xml version='1.0' encoding='UTF-8'?>\n";
  const std::string body = ex.body();
  REQUIRE(body.starts_with(decl));
  REQUIRE(body.ends_with("<Doc>200</Doc>"));
  std::string between = body.substr(decl.size(), body.size() - decl.size() - 14);
  CHECK(between.size() >= 2);  // 50 ms of grace, then one every 20 ms over 100 ms
  CHECK(between.find_first_not_of(' ') == std::string::npos);
  CHECK(ex.finished);
}

TEST_CASE("complete heartbeat: an error after heartbeats follows a newline") {
  RecordingExchange ex;
  bool ran = false;
  auto answer = run(ex, answer_after(100ms, 400, &ran));
  CHECK_FALSE(answer);
  CHECK(ex.response_status() == 200);
  CHECK(ex.body().ends_with(" \n<Doc>400</Doc>"));
}

TEST_CASE("complete heartbeat: a client gone still lets the work end") {
  RecordingExchange ex;
  ex.fail_writes = true;
  bool ran = false;
  auto answer = run(ex, answer_after(120ms, 200, &ran));
  CHECK_FALSE(answer);
  CHECK(ran);
  CHECK_FALSE(ex.finished);
}
