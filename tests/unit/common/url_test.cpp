#include "common/http/url.h"

#include <doctest/doctest.h>

using apus::common::http::percent_decode;
using apus::common::http::quote;
using apus::common::http::split_path;
using apus::common::http::validate_device_partition;

TEST_CASE("url: percent_decode keeps malformed escapes, as Python's unquote") {
  CHECK(percent_decode("/a%20b/c%2Fd") == "/a b/c/d");
  CHECK(percent_decode("%e2%98%83") == "\xe2\x98\x83");
  CHECK(percent_decode("100%") == "100%");
  CHECK(percent_decode("%zz%4") == "%zz%4");
  CHECK(percent_decode("a+b") == "a+b");
}

TEST_CASE("url: quote as Python's urllib.parse.quote") {
  CHECK(quote("/v1/AUTH_test/c/o b") == "/v1/AUTH_test/c/o%20b");
  CHECK(quote("a~b_c.d-e") == "a~b_c.d-e");
  CHECK(quote("\xe2\x98\x83") == "%E2%98%83");
  CHECK(quote("a/b", "") == "a%2Fb");
  CHECK(quote(std::string("\0", 1)) == "%00");
}

TEST_CASE("url: split_path follows Swift's rules") {
  auto r = split_path("/a", 1);
  REQUIRE(r.ok());
  CHECK(r->size() == 1);
  CHECK((*r)[0] == "a");

  r = split_path("/a", 1, 2);
  REQUIRE(r.ok());
  CHECK((*r)[0] == "a");
  CHECK(!(*r)[1].has_value());

  r = split_path("/a/c", 1, 2);
  REQUIRE(r.ok());
  CHECK((*r)[1] == "c");

  r = split_path("/a/c/o/r", 1, 3, true);
  REQUIRE(r.ok());
  CHECK((*r)[2] == "o/r");

  r = split_path("/sda1/12/a/c/o//x/", 5, 5, true);
  REQUIRE(r.ok());
  CHECK((*r)[4] == "o//x/");

  // A trailing slash is allowed, more segments are not, empty required ones are not.
  CHECK(split_path("/a/", 1).ok());
  CHECK_FALSE(split_path("/a/c", 1).ok());
  CHECK_FALSE(split_path("//c", 2).ok());
  CHECK_FALSE(split_path("a/c", 2).ok());
  CHECK_FALSE(split_path("/a", 2).ok());
  CHECK(split_path("/a/c/", 1, 2).ok());  // a trailing slash after the last segment is fine
  auto bad = split_path("/a b/c/d", 1, 2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "Invalid path: /a%20b/c/d");
  // Object path with an empty object segment.
  r = split_path("/sda1/1/a/c/", 4, 5, true);
  REQUIRE(r.ok());
  CHECK((*r)[4] == "");
}

TEST_CASE("url: validate_device_partition refuses traversal") {
  CHECK(validate_device_partition("sda1", "123").ok());
  CHECK_FALSE(validate_device_partition("..", "1").ok());
  CHECK_FALSE(validate_device_partition("sda", "").ok());
  CHECK_FALSE(validate_device_partition("a/b", "1").ok());
  CHECK(validate_device_partition("sda", ".").message() == "Invalid partition: .");
}

TEST_CASE("with_query_param replaces every field of that name and keeps the others as sent") {
  using apus::common::http::with_query_param;
  CHECK(with_query_param("", "format", "json") == "format=json");
  CHECK(with_query_param("format=xml&prefix=a%2Fb", "format", "json") ==
        "prefix=a%2Fb&format=json");
  CHECK(with_query_param("format&limit=2&format=plain", "format", "json") == "limit=2&format=json");
  CHECK(with_query_param("%66ormat=xml", "format", "json") == "format=json");  // decoded name
  CHECK(with_query_param("formats=1", "format", "json") == "formats=1&format=json");
  CHECK(with_query_param("a=1", "marker", "x/\xc3\xa9 &") == "a=1&marker=x%2F%C3%A9%20%26");
  CHECK(apus::common::http::without_query_param("states=listing&a=1&states", "states") == "a=1");
}

TEST_CASE("split_container_path takes account/container and nothing else") {
  using apus::common::http::split_container_path;
  CHECK(split_container_path(".shards_a/c-1") ==
        std::make_pair(std::string(".shards_a"), std::string("c-1")));
  for (const char* bad : {"", "a", "/c", "a/", "a/c/o", "/"}) {
    CHECK_FALSE(split_container_path(bad));
  }
}
