#include "object-server/delete_at.h"

#include <doctest/doctest.h>

#include <limits>

#include "common/config/config.h"
#include "common/timestamp.h"

using apus::common::Timestamp;
using apus::common::http::HeaderMap;
using apus::object::check_delete_headers;
using apus::common::clamp_delete_at;
using apus::object::delete_at_of;

using apus::object::parse_queue_container;

namespace {

HeaderMap headers(std::initializer_list<std::pair<const char*, const char*>> kv) {
  HeaderMap h;
  for (const auto& [k, v] : kv) h.set(k, v);
  return h;
}

const Timestamp kNow = *Timestamp::parse("1700000000.00000");

}  // namespace

TEST_CASE("delete_at: header integers parse as Python's int() without throwing or overflowing") {
  CHECK(apus::common::parse_python_int_saturating("42") == 42);
  CHECK(apus::common::parse_python_int_saturating(" -7\t") == -7);
  CHECK(apus::common::parse_python_int_saturating("+5") == 5);
  CHECK(apus::common::parse_python_int_saturating("99999999999999999999") == std::numeric_limits<int64_t>::max());
  CHECK(apus::common::parse_python_int_saturating("-99999999999999999999") == -std::numeric_limits<int64_t>::max());
  for (const char* junk : {"", " ", "abc", "1.5", "1e5", "--1", "+", "0x10", "1 2"}) {
    CHECK_MESSAGE(!apus::common::parse_python_int_saturating(junk), junk);
  }
  CHECK(delete_at_of({{"X-Delete-At", "abc"}}) == 0);
  CHECK(delete_at_of({{"X-Delete-At", "1700000100"}}) == 1700000100);
  CHECK(clamp_delete_at(1e300) == 9999999999);
  CHECK(clamp_delete_at(-1e300) == 0);
  CHECK(clamp_delete_at(std::numeric_limits<double>::quiet_NaN()) == 0);
  CHECK(clamp_delete_at(std::numeric_limits<int64_t>::max()) == 9999999999);
}

TEST_CASE("delete_at: X-Delete-At-Container reads as Python's float()") {
  CHECK(parse_queue_container("1700006400") == 1700006400);
  CHECK(parse_queue_container(" 1.7e9 ") == 1700000000);
  CHECK(parse_queue_container("-5") == 0);
  CHECK(parse_queue_container("inf") == 9999999999);
  CHECK(parse_queue_container("1e999") == 9999999999);
  for (const char* junk : {"", "abc", "0x10", "nan(1)", "1 2", "--1", "- 1", "1e"}) {
    CHECK_MESSAGE(!parse_queue_container(junk), junk);
  }
}

TEST_CASE("delete_at: check_delete_headers answers as Swift's") {
  // The 400 body Swift answers, or "" when the request goes on.
  auto refusal = [](HeaderMap h) -> std::string {
    auto checked = check_delete_headers(h, kNow);
    if (checked.ok()) return "";
    CHECK(checked.refusal().status == 400);
    CHECK(checked.refusal().headers.get_or("Content-Type", "") == "text/plain");
    return checked.refusal().body;
  };
  CHECK(refusal(headers({{"X-Delete-At", "abc"}})) == "Non-integer X-Delete-At");
  CHECK(refusal(headers({{"X-Delete-At", ""}})) == "Non-integer X-Delete-At");
  CHECK(refusal(headers({{"X-Delete-After", "abc"}})) == "Non-integer X-Delete-After");
  CHECK(refusal(headers({{"X-Delete-After", "-5"}})) == "X-Delete-After in past");
  CHECK(refusal(headers({{"X-Delete-After", "0"}})) == "X-Delete-After in past");
  CHECK(refusal(headers({{"X-Delete-At", "1700000000"}})) == "X-Delete-At in past");
  CHECK(refusal(headers({{"X-Delete-At", "1600000000"}, {"X-Backend-Replication", "yes"}}))
            .empty());
  CHECK(refusal(headers({})).empty());

  // X-Delete-After wins and becomes a ten-digit X-Delete-At.
  auto r = check_delete_headers(headers({{"X-Delete-After", "100"}, {"X-Delete-At", "abc"}}), kNow);
  REQUIRE(r.ok());
  CHECK(r->value == "1700000100");
  CHECK(r->delete_at == 1700000100);
  // now + a huge X-Delete-After: clamped as Swift's normalize_delete_at_timestamp (a double
  // to int64 conversion of it was undefined behaviour).
  r = check_delete_headers(headers({{"X-Delete-After", "99999999999999999999"}}), kNow);
  REQUIRE(r.ok());
  CHECK(r->value == "9999999999");
  r = check_delete_headers(headers({{"X-Delete-After", "9223372036854775807"}}), kNow);
  REQUIRE(r.ok());
  CHECK(r->value == "9999999999");
  // A huge X-Delete-At is stored as sent, as Swift does.
  r = check_delete_headers(headers({{"X-Delete-At", "99999999999999999999"}}), kNow);
  REQUIRE(r.ok());
  CHECK(r->value == "99999999999999999999");
}
