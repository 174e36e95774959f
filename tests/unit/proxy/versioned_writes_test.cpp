// Object versioning's and legacy versioned writes' pure parts: reserved names, version ids
// (inverted timestamps) and the listing rewrites. Expected values are what Swift 2.30.1's
// object_versioning.py computes on the same inputs (its middleware driven by a fake app).
#include "proxy/versioned_writes.h"

#include <array>
#include <string>

#include <doctest/doctest.h>

#include "common/listing_format.h"

namespace apus::proxy {
namespace {

using namespace std::string_literals;
using namespace versioning;

TEST_CASE("versioning: reserved names and the versions container") {
  CHECK(reserved_name({"versions", "c"}) == "\0versions\0c"s);
  CHECK(reserved_name({"o", ""}) == "\0o\0"s);
  CHECK(reserved_name({"pre"}) == "\0pre"s);
  CHECK_FALSE(reserved_name({"a\0b"s}).has_value());
  CHECK(split_reserved_name("\0a\0b"s) == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(split_reserved_name("a").has_value());
  CHECK(versions_container_name("c") == "\0versions\0c"s);
  CHECK(split_versions_container_name("\0versions\0c"s) == "c");
  CHECK(split_versions_container_name("c") == "c");
  CHECK(split_versions_container_name("\0other\0c"s) == "\0other\0c"s);
}

TEST_CASE("versioning: version object names hold the inverted timestamp") {
  auto name = versions_object_name("o", "1600000000.12345");
  REQUIRE(name.ok());
  CHECK(*name == "\0o\0008399999999.87654"s);
  auto parsed = parse_versions_object_name(*name);
  CHECK(parsed.first == "o");
  CHECK(parsed.second == "1600000000.12345");
  // Not a version name: the name itself, no id.
  CHECK(parse_versions_object_name("o").second == std::nullopt);
  CHECK(parse_versions_object_name("\0o\0notatime"s).second == std::nullopt);
  CHECK(parse_versions_object_name("\0o\0x\0y"s).second == std::nullopt);
  // A version id with an offset cannot be inverted.
  CHECK_FALSE(versions_object_name("o", "1600000000.12345_0000000000000001").ok());
  CHECK_FALSE(versions_object_name("o", "nope").ok());
  // Newer versions sort first.
  CHECK(*versions_object_name("o", "1600000001.00000") < *versions_object_name("o", "1600000000.00000"));
}

TEST_CASE("versioning: version ids drop the offset, and what a version-id may be") {
  CHECK(timestamp_to_version("1600000000.1_0000000000000003").value() == "1600000000.10000");
  CHECK(timestamp_to_version("1600000000").value() == "1600000000.00000");
  CHECK_FALSE(timestamp_to_version("x").ok());
  CHECK(valid_version("null", true));
  CHECK_FALSE(valid_version("null", false));
  CHECK(valid_version("1600000000.12345", false));
  CHECK_FALSE(valid_version("abc", true));
}

TEST_CASE("versioning: ?versions markers") {
  auto m = versions_listing_marker("obj"s, std::nullopt);
  REQUIRE(m.ok());
  CHECK(**m == "\0obj\0:"s);  // past every version of obj
  m = versions_listing_marker("obj"s, "null"s);
  REQUIRE(m.ok());
  CHECK(**m == "\0obj\0"s);  // before every version of obj
  m = versions_listing_marker("obj"s, "1600000000.12345"s);
  REQUIRE(m.ok());
  CHECK(**m == "\0obj\0008399999999.87654"s);
  m = versions_listing_marker(std::nullopt, std::nullopt);
  REQUIRE(m.ok());
  CHECK_FALSE(m->has_value());
  m = versions_listing_marker(std::nullopt, "1"s);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "version_marker param requires marker");
  m = versions_listing_marker("obj"s, "junk"s);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "invalid version_marker param");
}

constexpr std::string_view kPrimary =
    R"([{"name": "a", "hash": "etag-a", "bytes": 1, "content_type": "text/plain", )"
    R"("last_modified": "2020-01-01T00:00:00.000000"}, )"
    R"({"name": "b", "hash": "d41d8cd98f00b204e9800998ecf8427e; slo_etag=xyz", "bytes": 0, )"
    R"("content_type": "text/plain", "last_modified": "2020-01-02T00:00:00.000000", )"
    R"("symlink_path": "/v1/AUTH_a/%00versions%00c/%00b%008399999999.87654", )"
    R"("symlink_etag": "etag-b2", "symlink_bytes": 5}, {"subdir": "d/"}])";

constexpr std::string_view kVersions =
    R"([{"name": "\u0000b\u00008399999999.87654", "hash": "etag-b2", "bytes": 5, )"
    R"("content_type": "text/plain", "last_modified": "2020-01-02T00:00:00.000000"}, )"
    R"({"name": "\u0000b\u00008399999999.97654", "hash": "etag-b1", "bytes": 3, )"
    R"("content_type": "text/plain", "last_modified": "2020-01-01T00:00:00.000000"}, )"
    R"({"name": "\u0000c\u00008399999999.87654", "hash": "d41d8cd98f00b204e9800998ecf8427e", )"
    R"("bytes": 0, "content_type": "application/x-deleted;swift_versions_deleted=1", )"
    R"("last_modified": "2020-01-03T00:00:00.000000"}, {"subdir": "\u0000d/"}])";

TEST_CASE("versioning: a versioned container's listing shows the versions' sizes and etags") {
  auto out = rewrite_container_listing(kPrimary, "\0versions\0c"s, "c", false);
  REQUIRE(out.has_value());
  CHECK(*out ==
        R"([{"name": "a", "hash": "etag-a", "bytes": 1, "content_type": "text/plain", )"
        R"("last_modified": "2020-01-01T00:00:00.000000"}, {"name": "b", "hash": )"
        R"("etag-b2; slo_etag=xyz", "bytes": 5, "content_type": "text/plain", "last_modified": )"
        R"("2020-01-02T00:00:00.000000", "symlink_path": "/v1/AUTH_a/c/b?version-id=)"
        R"(1600000000.12345", "version_symlink": true}, {"subdir": "d/"}])");
  // A link into another container keeps its fields.
  auto other = rewrite_container_listing(kPrimary, "\0versions\0x"s, "c", false);
  REQUIRE(other.has_value());
  CHECK(other->find("version_symlink") == std::string::npos);
  CHECK(other->find("symlink_etag") != std::string::npos);
  CHECK_FALSE(rewrite_container_listing("not json", "\0versions\0c"s, "c", false).has_value());
}

TEST_CASE("versioning: ?versions merges the links, null versions and the versions container") {
  auto primary = rewrite_container_listing(kPrimary, "\0versions\0c"s, "c", true);
  REQUIRE(primary.has_value());
  auto out = merge_versions_listing(*primary, std::string(kVersions), "AUTH_a",
                                    "\0versions\0c"s, false, 10000);
  REQUIRE(out.has_value());
  const std::string a_null =
      R"({"name": "a", "hash": "etag-a", "bytes": 1, "content_type": "text/plain", )"
      R"("last_modified": "2020-01-01T00:00:00.000000", "version_id": "null", "is_latest": true})";
  const std::string b2 =
      R"({"name": "b", "hash": "etag-b2", "bytes": 5, "content_type": "text/plain", )"
      R"("last_modified": "2020-01-02T00:00:00.000000", "is_latest": true, "version_id": )"
      R"("1600000000.12345"})";
  const std::string b1 =
      R"({"name": "b", "hash": "etag-b1", "bytes": 3, "content_type": "text/plain", )"
      R"("last_modified": "2020-01-01T00:00:00.000000", "is_latest": false, "version_id": )"
      R"("1600000000.02345"})";
  const std::string c =
      R"({"name": "c", "hash": "d41d8cd98f00b204e9800998ecf8427e", "bytes": 0, )"
      R"("content_type": "application/x-deleted;swift_versions_deleted=1", "last_modified": )"
      R"("2020-01-03T00:00:00.000000", "is_latest": true, "version_id": "1600000000.12345"})";
  const std::string d = R"({"subdir": "d/"})";
  CHECK(*out == "[" + a_null + ", " + b2 + ", " + b1 + ", " + c + ", " + d + "]");
  auto reversed = merge_versions_listing(*primary, std::string(kVersions), "AUTH_a",
                                         "\0versions\0c"s, true, 10000);
  CHECK(*reversed == "[" + d + ", " + c + ", " + b2 + ", " + b1 + ", " + a_null + "]");
  auto limited = merge_versions_listing(*primary, std::string(kVersions), "AUTH_a",
                                        "\0versions\0c"s, false, 2);
  CHECK(*limited == "[" + a_null + ", " + b2 + "]");
}

TEST_CASE("versioning: ?versions without a versions container lists the links' versions") {
  auto primary = rewrite_container_listing(kPrimary, "\0versions\0c"s, "c", true);
  REQUIRE(primary.has_value());
  auto out = merge_versions_listing(*primary, std::nullopt, "AUTH_a", "\0versions\0c"s, false,
                                    10000);
  REQUIRE(out.has_value());
  CHECK(*out ==
        R"([{"name": "a", "hash": "etag-a", "bytes": 1, "content_type": "text/plain", )"
        R"("last_modified": "2020-01-01T00:00:00.000000", "version_id": "null", "is_latest": )"
        R"(true}, {"name": "b", "is_latest": true, "version_id": "1600000000.12345", )"
        R"("content_type": "text/plain", "bytes": 5, "hash": "etag-b2; slo_etag=xyz", )"
        R"("last_modified": "2020-01-02T00:00:00.000000"}, {"subdir": "d/"}])");
}

TEST_CASE("versioning: account listings count the versions containers' bytes") {
  constexpr std::string_view kAccount =
      R"([{"name": "c", "count": 2, "bytes": 10, "last_modified": "2020-01-01T00:00:00.000000"}, )"
      R"({"name": "e", "count": 1, "bytes": 1, "last_modified": "2020-01-01T00:00:00.000000"}])";
  constexpr std::string_view kHidden =
      R"([{"name": "\u0000versions\u0000c", "count": 3, "bytes": 8, "last_modified": )"
      R"("2020-01-02T00:00:00.000000"}, {"name": "\u0000versions\u0000gone", "count": 1, )"
      R"("bytes": 4, "last_modified": "2020-01-03T00:00:00.000000"}])";
  auto out = merge_account_listing(kAccount, kHidden, false, 10000);
  REQUIRE(out.has_value());
  CHECK(*out ==
        R"([{"name": "c", "count": 2, "bytes": 18, "last_modified": "2020-01-01T00:00:00.000000"}, )"
        R"({"name": "e", "count": 1, "bytes": 1, "last_modified": "2020-01-01T00:00:00.000000"}, )"
        R"({"name": "gone", "count": 0, "bytes": 4, "last_modified": "2020-01-03T00:00:00.000000"}])");
  // An unreadable versions listing changes nothing.
  auto same = merge_account_listing(kAccount, "oops", false, 10000);
  CHECK(same->find("\"bytes\": 10") != std::string::npos);
}

TEST_CASE("versioning: legacy version names") {
  CHECK(legacy_versions_prefix("obj") == "003obj/");
  CHECK(legacy_versions_prefix(std::string(300, 'x')).substr(0, 3) == "12c");
  CHECK(legacy_versions_name("obj", "1600000000.1").value() == "003obj/1600000000.10000");
}

TEST_CASE("listing: best_match as swob's Accept") {
  static constexpr std::array<std::string_view, 1> kJson = {"application/json"};
  CHECK(*common::listing::best_match(std::nullopt, kJson) == "application/json");
  CHECK(*common::listing::best_match("*/*", kJson) == "application/json");
  CHECK(*common::listing::best_match("text/plain, application/json;q=0.5", kJson) ==
        "application/json");
  CHECK_FALSE(common::listing::best_match("application/xml", kJson)->has_value());
  CHECK_FALSE(common::listing::best_match("text/plain", kJson)->has_value());
  CHECK_FALSE(common::listing::best_match("bad header", kJson).ok());
}

}  // namespace
}  // namespace apus::proxy
