// Bulk answers: the report in each format byte for byte as Swift 2.30.1's get_response_body()
// writes it (expected strings taken from it), format negotiation, and the streamed answer
// with and without heartbeats.
#include "proxy/bulk_response.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <doctest/doctest.h>

#include "tests/unit/proxy/recording_exchange.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using testing::RecordingExchange;

BulkReport sample_delete() {
  BulkReport r = BulkReport::for_delete();
  r.set_status(400, "a<b&c");
  r.add("Number Deleted", 2);
  r.add("Number Not Found");
  r.errors = {{"/c/o%20x", "409 Conflict"}, {"c", "401 Unauthorized"}};
  return r;
}

TEST_CASE("bulk report as JSON keeps the fields in order, then Errors") {
  CHECK(bulk_report_body("application/json", sample_delete(), "delete") ==
        R"({"Response Status": "400 Bad Request", "Response Body": "a<b&c", )"
        R"("Number Deleted": 2, "Number Not Found": 1, "Errors": [["/c/o%20x", "409 Conflict"], )"
        R"(["c", "401 Unauthorized"]]})");
  BulkReport e = BulkReport::for_extract();
  e.set("Response Body", std::string("\xe2\x98\x83"));
  e.add("Number Files Created", 3);
  CHECK(bulk_report_body("application/json", e, "extract") ==
        R"({"Response Status": "201 Created", "Response Body": "\u2603", )"
        R"("Number Files Created": 3, "Errors": []})");
}

TEST_CASE("bulk report as XML sorts the fields and escapes") {
  std::string want =
      "<delete>\n<number_deleted>2</number_deleted>\n<number_not_found>1</number_not_found>\n"
      "<response_body>a&lt;b&amp;c</response_body>\n"
      "<response_status>400 Bad Request</response_status>\n<errors>\n"
      "<object><name>/c/o%20x</name><status>409 Conflict</status></object>\n"
      "<object><name>c</name><status>401 Unauthorized</status></object>\n</errors>\n</delete>\n";
  CHECK(bulk_report_body("application/xml", sample_delete(), "delete") == want);
  CHECK(bulk_report_body("text/xml", sample_delete(), "delete") == want);
}

TEST_CASE("bulk report as text, also for an unknown format") {
  std::string want =
      "Number Deleted: 2\nNumber Not Found: 1\nResponse Body: a<b&c\n"
      "Response Status: 400 Bad Request\nErrors:\n/c/o%20x, 409 Conflict\nc, 401 Unauthorized\n";
  CHECK(bulk_report_body("text/plain", sample_delete(), "delete") == want);
  CHECK(bulk_report_body("", sample_delete(), "delete") == want);
}

TEST_CASE("bulk content type follows Accept") {
  CHECK(bulk_content_type(std::nullopt) == "text/plain");
  CHECK(bulk_content_type("application/json") == "application/json");
  CHECK(bulk_content_type("text/xml") == "text/xml");
  CHECK(bulk_content_type("application/xml;q=0.5, application/json;q=0.9") == "application/json");
  CHECK(bulk_content_type("*/*") == "text/plain");
  CHECK_FALSE(bulk_content_type("image/png"));
  CHECK_FALSE(bulk_content_type("good_xml"));  // malformed: Swift ignores it, then 406
}

// An Exchange recording what a handler sends.
template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

TEST_CASE("bulk answer without heartbeat is the bare report") {
  RecordingExchange ex{Request()};
  run([&]() -> net::awaitable<void> {
    BulkAnswer a(ex, "application/xml", 10);
    CHECK((co_await a.heartbeat()).ok());
    CHECK(ex.chunks.empty());
    CHECK((co_await a.finish(BulkReport::for_delete(), "delete")).ok());
  });
  CHECK(ex.response_status() == 200);
  CHECK(ex.response_->headers.get_or("Content-Type", "") == "application/xml");
  REQUIRE(ex.chunks.size() == 1);
  CHECK(ex.chunks[0].starts_with("<delete>\n"));
  CHECK(ex.finished);
}

TEST_CASE("bulk answer heartbeats: XML declaration first, then spaces, then CRLFCRLF") {
  RecordingExchange ex{Request()};
  run([&]() -> net::awaitable<void> {
    BulkAnswer a(ex, "application/xml", 0);
    net::steady_timer t(co_await net::this_coro::executor);
    for (int i = 0; i < 2; ++i) {
      t.expires_after(std::chrono::milliseconds(2));
      co_await t.async_wait(net::use_awaitable);
      CHECK((co_await a.heartbeat()).ok());
    }
    CHECK((co_await a.finish(BulkReport::for_delete(), "delete")).ok());
  });
  REQUIRE(ex.chunks.size() == 3);
  CHECK(ex.chunks[0] == "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  CHECK(ex.chunks[1] == " ");
  CHECK(ex.chunks[2].starts_with("\r\n\r\n<delete>\n"));
}

TEST_CASE("bulk answer with no acceptable format keeps swob's default type, text body") {
  RecordingExchange ex{Request()};
  run([&]() -> net::awaitable<void> {
    BulkAnswer a(ex, std::nullopt, 0);
    BulkReport r = BulkReport::for_delete();
    r.set_status(406, "x");
    CHECK((co_await a.finish(r, "delete")).ok());
  });
  CHECK(ex.response_->headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  REQUIRE(ex.chunks.size() == 1);
  CHECK(ex.chunks[0].find("Response Status: 406 Not Acceptable\n") != std::string::npos);
}

}  // namespace
}  // namespace apus::proxy
