#include "common/http/headers.h"

#include <doctest/doctest.h>

using apus::common::http::HeaderMap;
using apus::common::http::iequals;
using apus::common::http::istarts_with;

TEST_CASE("headers: case-insensitive comparisons") {
  CHECK(iequals("Content-Length", "content-length"));
  CHECK_FALSE(iequals("Content-Length", "Content-Lengt"));
  CHECK(istarts_with("X-Object-Meta-Color", "x-object-meta-"));
  CHECK_FALSE(istarts_with("X-Obj", "x-object-meta-"));
}

TEST_CASE("headers: get, set, add, erase keep order and spelling") {
  HeaderMap h;
  h.add("X-Object-Meta-Color", "blue");
  h.add("Content-Type", "text/plain");
  h.add("x-object-meta-color", "red");
  CHECK(h.size() == 3);
  CHECK(h.get("X-OBJECT-META-COLOR") == "blue");  // the first of repeated fields
  CHECK(h.get_or("Missing", "dflt") == "dflt");
  CHECK_FALSE(h.get("Missing"));

  h.set("X-Object-Meta-Color", "green");  // replaces both fields with one
  CHECK(h.size() == 2);
  CHECK(h.get("x-object-meta-color") == "green");
  CHECK(h.begin()->first == "X-Object-Meta-Color");  // keeps its place and spelling

  h.set("ETag", "abc");
  CHECK(h.size() == 3);
  CHECK(h.erase("etag") == 1);
  CHECK(h.erase("etag") == 0);

  h.add("X-Object-Meta-A", "1");
  h.add("X-Object-Meta-B", "2");
  CHECK(h.erase_prefix("x-object-meta-") == 3);
  CHECK(h.size() == 1);
  CHECK(h.contains("Content-Type"));
}

TEST_CASE("headers: title_case spells names as Python's str.title()") {
  CHECK(apus::common::http::title_case("x-object-meta-foo_bar") == "X-Object-Meta-Foo_Bar");
  CHECK(apus::common::http::title_case("CONTENT-TYPE") == "Content-Type");
  CHECK(apus::common::http::title_case("x-2b-or-not") == "X-2B-Or-Not");
}
