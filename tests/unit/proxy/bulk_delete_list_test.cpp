// Bulk-delete bodies: the names and refusals Swift 2.30.1's get_objs_to_delete() gives for
// the same bodies (expected values taken from it with max_deletes 3 and max_path_length 10),
// whatever way the body is split into chunks.
#include "proxy/bulk_delete_list.h"

#include <variant>

#include <doctest/doctest.h>

namespace apus::proxy {
namespace {

using Outcome = std::variant<std::vector<std::string>, DeleteListError>;

Outcome parse(std::string_view body, size_t chunk) {
  DeleteListParser p(3, 10);
  for (size_t i = 0; i < body.size(); i += chunk) {
    if (auto e = p.feed(body.substr(i, chunk))) return *e;
  }
  if (auto e = p.finish()) return *e;
  return p.names();
}

void check_all_splits(std::string_view body, const Outcome& want) {
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{10}, size_t{11}, size_t{1000}}) {
    CAPTURE(chunk);
    CHECK(parse(body, chunk) == want);
  }
}

using Names = std::vector<std::string>;

TEST_CASE("bulk delete list: names, blank lines and the last line") {
  check_all_splits("/c/o\n/c/o2", Names{"/c/o", "/c/o2"});
  check_all_splits("\n\n/c/%20x \n", Names{"", "", "/c/ x"});
  check_all_splits("a\nb\nc\n", Names{"a", "b", "c"});
  check_all_splits("", Names{});
  check_all_splits(" \t\r\n", Names{""});
}

TEST_CASE("bulk delete list: percent-decoding to raw bytes, malformed escapes kept") {
  check_all_splits("c/\xe2%98\x83\r\n", Names{"c/\xe2\x98\x83"});
  check_all_splits("%zz\n%41", Names{"%zz", "A"});
}

TEST_CASE("bulk delete list: too many names is 413") {
  check_all_splits("a\nb\nc\nd", DeleteListError{413, "Maximum Bulk Deletes: 3 per request"});
  check_all_splits("\n\n\n\n", DeleteListError{413, "Maximum Bulk Deletes: 3 per request"});
}

TEST_CASE("bulk delete list: a line over twice max_path_length is 400") {
  check_all_splits(std::string(25, 'a'), DeleteListError{400, "Invalid File Name"});
  check_all_splits(std::string(9, 'a') + "\n" + std::string(20, 'b'),
                   Names{std::string(9, 'a'), std::string(20, 'b')});
}

TEST_CASE("bulk delete list: refusal is final") {
  DeleteListParser p(3, 10);
  CHECK(p.feed(std::string(30, 'x')) == DeleteListError{400, "Invalid File Name"});
  CHECK(p.feed("a\n") == DeleteListError{400, "Invalid File Name"});
  CHECK(p.finish() == DeleteListError{400, "Invalid File Name"});
}

TEST_CASE("bulk delete list: objects before containers") {
  CHECK(names_object("c/o"));
  CHECK(names_object("/c/o/"));
  CHECK(names_object("/c/o/x"));
  CHECK_FALSE(names_object("/c/"));
  CHECK_FALSE(names_object("c"));
  CHECK_FALSE(names_object("///"));
  CHECK(strip_ascii_whitespace("\x0b a b\x0c") == "a b");
}

}  // namespace
}  // namespace apus::proxy
