#include "common/http/date.h"

#include <random>
#include <string>

#include <doctest/doctest.h>

#include "tests/unit/common/swift_vectors.h"

namespace apus::common::http {
namespace {

TEST_CASE("format_http_date: RFC 1123 in GMT") {
  CHECK(format_http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT");
  CHECK(format_http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT");
  CHECK(format_http_date(951782400) == "Tue, 29 Feb 2000 00:00:00 GMT");
  CHECK(format_http_date(9999999999) == "Sat, 20 Nov 2286 17:46:39 GMT");
  CHECK(format_http_date(-1) == "Wed, 31 Dec 1969 23:59:59 GMT");
  CHECK(format_http_date(784111777).size() == kHttpDateLength);
}

TEST_CASE("civil time round trip") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int64_t e = static_cast<int64_t>(rng() % 600000000000ULL) - 300000000000LL;
    const CivilTime t = civil_from_epoch(e);
    REQUIRE(epoch_from_civil(t.year, t.month, t.day, t.hour, t.minute, t.second) == e);
    REQUIRE(t.weekday >= 0);
    REQUIRE(t.weekday <= 6);
  }
  const CivilTime t = civil_from_epoch(784111777);
  CHECK(t.year == 1994);
  CHECK(t.month == 11);
  CHECK(t.day == 6);
  CHECK(t.weekday == 0);
}

TEST_CASE("parse_http_date: the three HTTP forms") {
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777);
  CHECK(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == 784111777);
  CHECK(parse_http_date("Sun Nov  6 08:49:37 1994") == 784111777);
}

TEST_CASE("parse_http_date: Swift's looseness and limits") {
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 +0500") == 784111777);  // zone ignored
  CHECK(parse_http_date("06 Nov 1994 08:49") == 784111740);
  CHECK(parse_http_date("Sun, 06 Nov 1994 08.49.37 GMT") == 784111777);
  CHECK(parse_http_date("Sun, 6 Nov 69 08:49:37 GMT") == parse_http_date("6 Nov 1969 08:49:37"));
  CHECK(parse_http_date("Sun, 6 Nov 68 08:49:37 GMT") == parse_http_date("6 Nov 2068 08:49:37"));
  CHECK_FALSE(parse_http_date(""));
  CHECK_FALSE(parse_http_date("garbage"));
  CHECK_FALSE(parse_http_date("Sun, 31 Feb 2000 00:00:00 GMT"));
  CHECK_FALSE(parse_http_date("Sun, 06 Nov 1994 24:00:00 GMT"));
  CHECK_FALSE(parse_http_date("Sun, 06 Nov 1994 23:59:60 GMT"));
  CHECK_FALSE(parse_http_date("Sun, 06 Nov 1994"));
  CHECK_FALSE(parse_http_date("1402464677"));
}

TEST_CASE("http_date_now: a well-formed current date") {
  const std::string now = http_date_now();
  CHECK(now.size() == kHttpDateLength);
  CHECK(now.substr(now.size() - 4) == " GMT");
  const std::optional<int64_t> parsed = parse_http_date(now);
  REQUIRE(parsed);
  CHECK(*parsed > 1700000000);
}

TEST_CASE("format_http_date matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("httpdate");
  CHECK(vectors.size() > 100);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 2);
    CHECK(format_http_date(std::stoll(v[0])) == v[1]);
    CHECK(parse_http_date(v[1]) == std::stoll(v[0]));
  }
}

TEST_CASE("parse_http_date matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("parsedate");
  CHECK(vectors.size() > 500);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 2);
    const std::string input = testing::unhex(v[0]);
    INFO("input: '", input, "'");
    const std::optional<int64_t> parsed = parse_http_date(input);
    CHECK((parsed ? std::to_string(*parsed) : "-") == v[1]);
  }
}

}  // namespace
}  // namespace apus::common::http
