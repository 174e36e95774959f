#include "common/http/headers.h"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

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

TEST_CASE("headers: is_safe_header_text refuses CR, LF and NUL (issue 12)") {
  using apus::common::http::is_safe_header_text;
  CHECK(is_safe_header_text("text/plain; charset=UTF-8"));
  CHECK(is_safe_header_text(""));
  CHECK(is_safe_header_text("tab\tand \x7f and \xc3\xa9"));
  CHECK_FALSE(is_safe_header_text("a\r\nSet-Cookie: x=1"));
  CHECK_FALSE(is_safe_header_text("a\rb"));
  CHECK_FALSE(is_safe_header_text("a\nb"));
  CHECK_FALSE(is_safe_header_text(std::string_view("a\0b", 3)));
}

TEST_CASE("headers: add_wsgi_field spells request names as Swift's WSGI layer (issue 12)") {
  // What Swift 2.30.1 under eventlet 0.33.1 answered on HEAD after a PUT with these headers.
  using apus::common::http::add_wsgi_field;
  HeaderMap h;
  add_wsgi_field(h, "X-Object-Meta-under_score", "v1");
  add_wsgi_field(h, "x-object-meta-MiXeD_CaSe", "v2");
  add_wsgi_field(h, "X-Object-Meta-dup", "a");
  add_wsgi_field(h, "X-Object-Meta-dup", "b");
  add_wsgi_field(h, "X-Object-Meta-Two-x", "1");
  add_wsgi_field(h, "X-Object-Meta-two_X", "2");
  add_wsgi_field(h, "X-Object-Meta-_lead", "3");
  add_wsgi_field(h, "content-type", "a/b");
  add_wsgi_field(h, "Content-Type", "c/d");      // eventlet takes the first
  add_wsgi_field(h, "Content_Type", "evil/x");   // not the real header: dropped
  add_wsgi_field(h, "Content_Length", "99");
  std::vector<std::pair<std::string, std::string>> got(h.begin(), h.end());
  std::vector<std::pair<std::string, std::string>> want = {
      {"X-Object-Meta-Under-Score", "v1"}, {"X-Object-Meta-Mixed-Case", "v2"},
      {"X-Object-Meta-Dup", "a,b"},        {"X-Object-Meta-Two-X", "1,2"},
      {"X-Object-Meta--Lead", "3"},        {"Content-Type", "a/b"}};
  CHECK(got == want);
}

TEST_CASE("headers: mask_field_names hides names eventlet takes and Beast refuses") {
  using apus::common::http::mask_field_names;
  using apus::common::http::unmask_field_name;
  std::vector<std::string> names;
  CHECK(!mask_field_names("GET / HTTP/1.1\r\nHost: x\r\nX-A_b: 1\r\n\r\n", names));
  CHECK(names.empty());
  auto masked = mask_field_names(
      "PUT /o HTTP/1.1\r\nX-Object-Meta-Foo=5Fbar: a:b\r\nHost: x\r\nx-amz-meta-(: c\r\n\r\n",
      names);
  REQUIRE(masked);
  CHECK(*masked ==
        "PUT /o HTTP/1.1\r\nApus-Masked-Field-0: a:b\r\nHost: x\r\nApus-Masked-Field-1: c\r\n\r\n");
  CHECK(names == std::vector<std::string>{"X-Object-Meta-Foo=5Fbar", "x-amz-meta-("});
  CHECK(unmask_field_name("Apus-Masked-Field-1", names) == "x-amz-meta-(");
  CHECK(unmask_field_name("Apus-Masked-Field-2", names) == "Apus-Masked-Field-2");
  CHECK(unmask_field_name("Host", names) == "Host");
  // Spaces, control bytes and bytes >= 0x80 stay for the parser to refuse.
  names.clear();
  CHECK(!mask_field_names("GET / HTTP/1.1\r\nX A=: 1\r\nX\x01=: 2\r\nX\xc3\xa9=: 3\r\n\r\n", names));
  CHECK(names.empty());
}
