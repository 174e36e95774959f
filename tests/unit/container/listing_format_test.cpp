#include "common/listing_format.h"

#include <doctest/doctest.h>

#include <vector>

#include <boost/json.hpp>

#include "common/http/headers.h"

using apus::common::listing::ContainerItem;
using apus::common::listing::negotiate;
using apus::common::listing::ObjectItem;

TEST_CASE("negotiate picks what Swift's get_listing_content_type picks") {
  CHECK(negotiate(std::nullopt, std::nullopt).content_type == "text/plain");
  CHECK(negotiate("json", std::nullopt).content_type == "application/json");
  CHECK(negotiate("XML", "application/json").content_type == "application/xml");
  CHECK(negotiate("yaml", std::nullopt).content_type == "text/plain");
  CHECK(negotiate(std::nullopt, "application/json").content_type == "application/json");
  CHECK(negotiate(std::nullopt, "text/*").content_type == "text/plain");
  CHECK(negotiate(std::nullopt, "*/*;q=0.5, text/xml").content_type == "text/xml");
  CHECK(negotiate(std::nullopt, "application/*;q=0.9, text/xml;q=0.8").content_type ==
        "application/json");
  CHECK(negotiate(std::nullopt, "image/png").status == 406);
  CHECK(negotiate(std::nullopt, "bogus").status == 400);
  CHECK(negotiate(std::nullopt, "text/plain;q=1;q=2").status == 400);
  CHECK(negotiate(std::nullopt, "text/plain;q=x").status == 400);
}

TEST_CASE("JSON listings are json.dumps output") {
  std::vector<ObjectItem> items(2);
  items[0].subdir = true;
  items[0].name = "p/";
  items[1].name = "caf\xc3\xa9 \"q\"\x01\xf0\x9f\x98\x80";
  items[1].bytes = 5;
  items[1].hash = "h";
  items[1].content_type = "text/plain";
  items[1].last_modified = "2023-11-14T22:13:22.000000";
  CHECK(apus::common::listing::to_json(items) ==
        "[{\"subdir\": \"p/\"}, {\"bytes\": 5, \"hash\": \"h\", \"name\": "
        "\"caf\\u00e9 \\\"q\\\"\\u0001\\ud83d\\ude00\", \"content_type\": \"text/plain\", "
        "\"last_modified\": \"2023-11-14T22:13:22.000000\"}]");
  CHECK(apus::common::listing::to_json(std::vector<ObjectItem>{}) == "[]");
  std::vector<ContainerItem> cs(1);
  cs[0].name = "c";
  cs[0].count = 3;
  cs[0].bytes = 15;
  cs[0].last_modified = "t";
  CHECK(apus::common::listing::to_json(cs) ==
        "[{\"name\": \"c\", \"count\": 3, \"bytes\": 15, \"last_modified\": \"t\"}]");
}

// Expected documents are ElementTree's output in Swift 2.30.1 (Python 3.11).
TEST_CASE("XML listings are ElementTree output") {
  std::vector<ObjectItem> items(2);
  items[0].subdir = true;
  items[0].name = "a\n>";
  items[1].name = "x>\"";
  items[1].last_modified = "t";
  CHECK(apus::common::listing::to_xml(items, "c") ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<container name=\"c\"><subdir "
        "name=\"a&#10;&gt;\"><name>a\n&gt;</name></subdir><object><name>x&gt;\"</name><hash "
        "/><bytes>0</bytes><content_type /><last_modified>t</last_modified></object></container>");
  CHECK(apus::common::listing::to_xml(std::vector<ObjectItem>{}, "c\"<>&\n\t\r") ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<container name=\"c&quot;&lt;&gt;&amp;&#10;&#09;&#13;\" />");
  std::vector<ContainerItem> cs(2);
  cs[0].subdir = true;
  cs[0].name = "p/";
  cs[1].name = "c";
  cs[1].count = 1;
  cs[1].bytes = 2;
  cs[1].last_modified = "t";
  CHECK(apus::common::listing::to_xml(cs, "a") ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<account name=\"a\">\n<subdir name=\"p/\" "
        "/>\n<container><name>c</name><count>1</count><bytes>2</bytes><last_modified>t</"
        "last_modified></container>\n</account>");
  CHECK(apus::common::listing::to_xml(std::vector<ContainerItem>{}, "a") ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<account name=\"a\">\n</account>");
}

TEST_CASE("extract_swift_bytes splits the swift_bytes parameter off, as Swift does") {
  using apus::common::http::extract_swift_bytes;
  auto [t1, b1] = extract_swift_bytes("text/plain;swift_bytes=12;charset=utf-8");
  CHECK(t1 == "text/plain;charset=utf-8");
  CHECK(b1 == std::optional<std::string>("12"));
  auto [t2, b2] = extract_swift_bytes("text/plain");
  CHECK(t2 == "text/plain");
  CHECK_FALSE(b2);
  auto [t3, b3] = extract_swift_bytes("a/b; x = \"q;r\" ;flag");
  CHECK(t3 == "a/b;x=\"q;r\";flag=");
  CHECK_FALSE(b3);
}

TEST_CASE("append_python_json writes a parsed value as Python's json.dumps() does") {
  // json.dumps(json.loads(text)) in Python 3.11, as SLO and symlink write back what they read.
  auto dumps = [](std::string_view text) {
    std::string out;
    apus::common::listing::append_python_json(out, boost::json::parse(text));
    return out;
  };
  CHECK(dumps(R"([{"name":"a\u00e9","bytes":3,"hash":"x","neg":-1}])") ==
        R"([{"name": "a\u00e9", "bytes": 3, "hash": "x", "neg": -1}])");
  CHECK(dumps(R"({"a":[],"b":{},"c":null,"d":true,"e":false})") ==
        R"({"a": [], "b": {}, "c": null, "d": true, "e": false})");
  CHECK(dumps(R"([1.5, 0.1, 1e300, 18446744073709551615])") ==
        "[1.5, 0.1, 1e+300, 18446744073709551615]");
  CHECK(dumps(R"(["\u2603 \"q\" \\ \n"])") == R"(["\u2603 \"q\" \\ \n"])");
}

TEST_CASE("python_json_indented is json.dumps(indent=2, sort_keys=True, separators=(',', ': '))") {
  // Python 3.11's output for the same input, as swift-object-info prints crypto metadata.
  auto v = boost::json::parse(R"({"b": [1, 2.5, {}], "a": {"z": "\u00e9", "y": []}, "c": null})");
  CHECK(apus::common::listing::python_json_indented(v, 2) ==
        "{\n  \"a\": {\n    \"y\": [],\n    \"z\": \"\\u00e9\"\n  },\n  \"b\": [\n    1,\n"
        "    2.5,\n    {}\n  ],\n  \"c\": null\n}");
  CHECK(apus::common::listing::python_json_indented(boost::json::parse("{}"), 2) == "{}");
  CHECK(apus::common::listing::python_json_indented(boost::json::parse("\"x\""), 2) == "\"x\"");
}
