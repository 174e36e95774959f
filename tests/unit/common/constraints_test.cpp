#include "common/constraints.h"

#include <string>

#include <doctest/doctest.h>

#include "common/config/config.h"

namespace apus::common {
namespace {

using http::HeaderMap;

HeaderMap object_put(std::string_view length = "10") {
  HeaderMap h;
  h.set("Content-Length", length);
  h.set("Content-Type", "text/plain");
  h.set("X-Timestamp", "1700000000.00000");
  return h;
}

void check_fails(const CheckResult& r, int status, std::string_view body) {
  CHECK_FALSE(r.ok());
  CHECK(r.status == status);
  CHECK(r.body == body);
}

TEST_CASE("constraints: defaults match Swift") {
  Constraints c;
  CHECK(c.max_file_size == 5368709122);
  CHECK(c.max_meta_name_length == 128);
  CHECK(c.max_meta_value_length == 256);
  CHECK(c.max_meta_count == 90);
  CHECK(c.max_meta_overall_size == 4096);
  CHECK(c.max_header_size == 8192);
  CHECK(c.max_object_name_length == 1024);
  CHECK(c.container_listing_limit == 10000);
  CHECK(c.account_listing_limit == 10000);
  CHECK(c.max_account_name_length == 256);
  CHECK(c.max_container_name_length == 256);
  CHECK(c.valid_api_versions == std::vector<std::string>{"v1", "v1.0"});
  CHECK(c.extra_header_count == 0);
  CHECK(c.auto_create_account_prefix == ".");
  CHECK(c.max_header_count() == 126);
  CHECK(c.backend_max_header_count() == 201);
  c.extra_header_count = -5;  // negative extra counts as 0
  CHECK(c.max_header_count() == 126);
  c.extra_header_count = 10;
  CHECK(c.max_header_count() == 136);
  CHECK(c.backend_max_header_count() == 217);
}

TEST_CASE("constraints: from_config") {
  Result<Config> conf = Config::parse(
      "[DEFAULT]\nmax_object_name_length = 10\n"
      "[swift-constraints]\nmax_header_size = 100\nvalid_api_versions = v2\n",
      "swift.conf");
  REQUIRE(conf.ok());
  Result<Constraints> c = Constraints::from_config(*conf);
  REQUIRE(c.ok());
  CHECK(c->max_header_size == 100);
  CHECK(c->max_object_name_length == 10);  // DEFAULT applies, as ConfigParser.get() does
  CHECK(c->valid_api_versions == std::vector<std::string>{"v2"});
  CHECK(valid_api_version(*c, "v2"));
  CHECK_FALSE(valid_api_version(*c, "v1"));

  // Without the section, nothing (not even DEFAULT) is applied.
  Result<Config> no_section = Config::parse("[DEFAULT]\nmax_file_size = 1\n", "swift.conf");
  REQUIRE(no_section.ok());
  CHECK(Constraints::from_config(*no_section)->max_file_size == 5368709122);

  Result<Config> bad = Config::parse("[swift-constraints]\nmax_file_size = 5G\n", "swift.conf");
  REQUIRE(bad.ok());
  Result<Constraints> err = Constraints::from_config(*bad);
  REQUIRE_FALSE(err.ok());
  CHECK(err.status().message() ==
        "swift.conf [swift-constraints] max_file_size: \"5G\" is not an integer");
}

TEST_CASE("constraints: valid_api_version") {
  Constraints c;
  CHECK(valid_api_version(c, "v1"));
  CHECK(valid_api_version(c, "v1.0"));
  CHECK_FALSE(valid_api_version(c, "v2"));
  CHECK_FALSE(valid_api_version(c, "V1"));
  CHECK_FALSE(valid_api_version(c, ""));
}

TEST_CASE("constraints: check_utf8 and check_path_utf8") {
  CHECK(check_utf8("/v1/AUTH_test/c/o"));
  CHECK(check_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\xa5\x94"));
  CHECK_FALSE(check_utf8(""));
  CHECK_FALSE(check_utf8("\xff"));
  CHECK_FALSE(check_utf8("\xc3"));                  // truncated
  CHECK_FALSE(check_utf8("\xc0\xaf"));              // overlong '/'
  CHECK_FALSE(check_utf8("\xe0\x80\xaf"));          // overlong
  CHECK_FALSE(check_utf8("\xed\xa0\x80"));          // surrogate U+D800
  CHECK_FALSE(check_utf8("\xf4\x90\x80\x80"));      // above U+10FFFF
  CHECK_FALSE(check_utf8(std::string("a\0b", 3)));  // NUL is the reserved byte
  CHECK(check_utf8(std::string("a\0b", 3), /*internal=*/true));

  CHECK(check_path_utf8("/sda1/0/a/c/o").ok());
  check_fails(check_path_utf8("/sda1/0/a/c/\xff"), 412, "Invalid UTF8 or contains NULL");
  check_fails(check_path_utf8(std::string("/a/\0c", 5)), 412, "Invalid UTF8 or contains NULL");
  CHECK(check_path_utf8(std::string("/a/\0c", 5), /*allow_reserved=*/true).ok());
}

TEST_CASE("constraints: error bodies spell header names as Swift's WSGI does") {
  // Swift reads names title-cased, '_' as '-', and writes its prefix in lower case before them.
  Constraints c;
  HeaderMap h;
  h.set("x-container-meta-big", std::string(257, 'v'));
  check_fails(check_metadata(c, h, MetadataTarget::kContainer), 400,
              "Metadata value longer than 256: x-container-meta-Big");
  HeaderMap upper;
  upper.set("X-CONTAINER-META-BIG_ONE2x", std::string(257, 'v'));
  check_fails(check_metadata(c, upper, MetadataTarget::kContainer), 400,
              "Metadata value longer than 256: x-container-meta-Big-One2X");
  HeaderMap named;
  named.set("x-object-meta-" + std::string(129, 'n'), "v");
  check_fails(check_metadata(c, named, MetadataTarget::kObject), 400,
              "Metadata name too long: x-object-meta-N" + std::string(128, 'n'));
  HeaderMap other;
  other.set("x-foo_bar", std::string(8193, 'v'));
  check_fails(check_metadata(c, other, MetadataTarget::kObject), 400,
              "Header value too long: X-Foo-Bar");
}

TEST_CASE("constraints: check_metadata") {
  Constraints c;
  HeaderMap h;
  h.set("X-Object-Meta-Color", "blue");
  h.set("X-Container-Meta-Ignored", std::string(1000, 'x'));  // other prefix: not counted
  CHECK(check_metadata(c, h, MetadataTarget::kObject).ok());

  SUBCASE("any header value longer than max_header_size") {
    h.set("X-Foo", std::string(8193, 'v'));
    check_fails(check_metadata(c, h, MetadataTarget::kObject), 400, "Header value too long: X-Foo");
    h.set("X-Foo", std::string(8192, 'v'));
    CHECK(check_metadata(c, h, MetadataTarget::kObject).ok());
  }
  SUBCASE("empty name") {
    h.set("X-Object-Meta-", "v");
    check_fails(check_metadata(c, h, MetadataTarget::kObject), 400,
                "Metadata name cannot be empty");
  }
  SUBCASE("name too long") {
    std::string name(129, 'n');
    h.set("X-Object-Meta-" + name, "v");
    check_fails(check_metadata(c, h, MetadataTarget::kObject), 400,
                "Metadata name too long: x-object-meta-N" + name.substr(1));
    h.erase("X-Object-Meta-" + name);
    h.set("X-Object-Meta-" + std::string(128, 'n'), "v");
    CHECK(check_metadata(c, h, MetadataTarget::kObject).ok());
  }
  SUBCASE("value too long, in bytes") {
    std::string value;
    for (int i = 0; i < 128; ++i) value += "\xc3\xa9";  // 128 chars, 256 bytes: the limit
    HeaderMap a;
    a.set("X-Account-Meta-K", value);
    CHECK(check_metadata(c, a, MetadataTarget::kAccount).ok());
    a.set("X-Account-Meta-K", value + "\xc3\xa9");  // 129 chars, 258 bytes
    check_fails(check_metadata(c, a, MetadataTarget::kAccount), 400,
                "Metadata value longer than 256: x-account-meta-K");
    // The same header is no object metadata.
    CHECK(check_metadata(c, a, MetadataTarget::kObject).ok());
  }
  SUBCASE("too many items") {
    HeaderMap many;
    for (int i = 0; i < 90; ++i) many.add("X-Container-Meta-K" + std::to_string(i), "v");
    CHECK(check_metadata(c, many, MetadataTarget::kContainer).ok());
    many.add("X-Container-Meta-Extra", "v");
    check_fails(check_metadata(c, many, MetadataTarget::kContainer), 400,
                "Too many metadata items; max 90");
  }
  SUBCASE("overall size") {
    HeaderMap big;
    // 16 items of 2-byte names and 254-byte values: 4096 bytes exactly, then one byte more.
    for (int i = 10; i < 26; ++i) {
      big.add("X-Object-Meta-" + std::to_string(i), std::string(254, 'v'));
    }
    CHECK(check_metadata(c, big, MetadataTarget::kObject).ok());
    big.add("X-Object-Meta-z", "");
    check_fails(check_metadata(c, big, MetadataTarget::kObject), 400,
                "Total metadata too large; max 4096");
  }
  SUBCASE("UTF-8 required for account and container only") {
    HeaderMap bad;
    bad.set("X-Container-Meta-K", "\xff");
    check_fails(check_metadata(c, bad, MetadataTarget::kContainer), 400,
                "Metadata must be valid UTF-8");
    HeaderMap bad_name;
    bad_name.set("X-Account-Meta-\xff", "v");
    check_fails(check_metadata(c, bad_name, MetadataTarget::kAccount), 400,
                "Metadata must be valid UTF-8");
    HeaderMap empty_value;
    empty_value.set("X-Account-Meta-K", "");  // an empty value deletes; always fine
    CHECK(check_metadata(c, empty_value, MetadataTarget::kAccount).ok());
    HeaderMap obj;
    obj.set("X-Object-Meta-K", "\xff");
    CHECK(check_metadata(c, obj, MetadataTarget::kObject).ok());
  }
  SUBCASE("limits come from the Constraints") {
    Constraints small;
    small.max_meta_count = 1;
    h.set("X-Object-Meta-Size", "L");
    check_fails(check_metadata(small, h, MetadataTarget::kObject), 400,
                "Too many metadata items; max 1");
  }
}

TEST_CASE("constraints: check_object_creation") {
  Constraints c;
  CHECK(check_object_creation(c, object_put(), "o").ok());

  SUBCASE("length required") {
    HeaderMap h = object_put();
    h.erase("Content-Length");
    check_fails(check_object_creation(c, h, "o"), 411, "Missing Content-Length header.");
    h.set("Transfer-Encoding", "chunked");
    CHECK(check_object_creation(c, h, "o").ok());
    h.set("Transfer-Encoding", "Chunked");  // Swift compares the raw value here
    check_fails(check_object_creation(c, h, "o"), 411, "Missing Content-Length header.");
  }
  SUBCASE("bad transfer encodings and lengths") {
    HeaderMap h = object_put();
    h.set("Transfer-Encoding", "gzip");
    check_fails(check_object_creation(c, h, "o"), 400, "Invalid Transfer-Encoding header value");
    h.set("Transfer-Encoding", "gzip, chunked");
    check_fails(check_object_creation(c, h, "o"), 501,
                "Unsupported Transfer-Coding header value specified in Transfer-Encoding "
                "header");
    check_fails(check_object_creation(c, object_put("ten"), "o"), 400,
                "Invalid Content-Length header value");
    check_fails(check_object_creation(c, object_put("-1"), "o"), 400,
                "Invalid Content-Length header value");
  }
  SUBCASE("too large") {
    CHECK(check_object_creation(c, object_put("5368709122"), "o").ok());
    check_fails(check_object_creation(c, object_put("5368709123"), "o"), 413,
                "Your request is too large.");
    HeaderMap chunked = object_put("5368709123");
    chunked.set("Transfer-Encoding", "chunked");  // length ignored when chunked
    CHECK(check_object_creation(c, chunked, "o").ok());
  }
  SUBCASE("object name length in bytes") {
    CHECK(check_object_creation(c, object_put(), std::string(1024, 'o')).ok());
    check_fails(check_object_creation(c, object_put(), std::string(1025, 'o')), 400,
                "Object name length of 1025 longer than 1024");
    std::string utf8;
    for (int i = 0; i < 513; ++i) utf8 += "\xc3\xa9";
    check_fails(check_object_creation(c, object_put(), utf8), 400,
                "Object name length of 1026 longer than 1024");
  }
  SUBCASE("content type") {
    HeaderMap h = object_put();
    h.erase("Content-Type");
    check_fails(check_object_creation(c, h, "o"), 400, "No content type");
    h.set("Content-Type", "text/\xff");
    check_fails(check_object_creation(c, h, "o"), 400, "Invalid Content-Type");
    h.set("Content-Type", "");
    check_fails(check_object_creation(c, h, "o"), 400, "Invalid Content-Type");
  }
  SUBCASE("object metadata is checked last") {
    HeaderMap h = object_put();
    h.set("X-Object-Meta-", "v");
    check_fails(check_object_creation(c, h, "o"), 400, "Metadata name cannot be empty");
  }
}

TEST_CASE("constraints: check_content_type rejects swift_ parameters") {
  HeaderMap h;
  CHECK(check_content_type(h).ok());
  h.set("Content-Type", "text/plain; charset=utf-8");
  CHECK(check_content_type(h).ok());
  h.set("Content-Type", "text/swift_plain");  // only parameters count
  CHECK(check_content_type(h).ok());
  h.set("Content-Type", "text/plain; charset=utf-8;  swift_bytes=10");
  check_fails(check_content_type(h), 400,
              "Invalid Content-Type, swift_* is not a valid parameter name.");
  h.set("Content-Type", "text/plain;swift_x");
  CHECK(check_content_type(h).status == 400);
}

}  // namespace
}  // namespace apus::common
