// SLO manifests (proxy/slo_manifest.h): a client's manifest is accepted or refused with the
// status and body Swift 2.30's parse_and_validate_input() gives (each expectation below was
// taken from Debian's python3-swift 2.30.1 run on the same input), the stored format and etag
// are byte-identical to Swift's, and byte ranges map onto segments as Swift's GET does.
#include "proxy/slo_manifest.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/crypto/md5.h"

namespace apus::proxy::slo {
namespace {

constexpr std::string_view kPath = "/v1/a/m/manifest";

// "OK" when accepted, else "<status> <body>".
std::string outcome(std::string_view body, std::string_view path = kPath) {
  auto r = parse_manifest_input(body, path);
  if (r) return "OK";
  return std::to_string(r.refusal().status) + " " + r.refusal().body;
}

std::string content_type(std::string_view body) {
  auto r = parse_manifest_input(body, kPath);
  REQUIRE(!r);
  return std::string(r.refusal().headers.get_or("Content-Type", ""));
}

TEST_CASE("slo manifest input: document-level refusals") {
  CHECK(outcome("not json") == "400 Manifest must be valid JSON.\n");
  CHECK(content_type("not json") == "text/html; charset=UTF-8");
  CHECK(outcome("{}") == "400 Manifest must be a list.\n");
  CHECK(outcome("\"x\"") == "400 Manifest must be a list.\n");
  CHECK(outcome("[]") == "OK");
  CHECK(outcome("[\xff]") == "400 Manifest must be valid JSON.\n");
}

TEST_CASE("slo manifest input: entry refusals, one line each") {
  CHECK(outcome(R"([{"path": "/c/o"}, 1])") == "400 Index 1: not a JSON object\n");
  CHECK(content_type(R"([{"path": "/c/o"}, 1])") == "text/plain");
  CHECK(outcome(R"(["data"])") ==
        "400 Index 0: not a JSON object\nInline data segments require at least one "
        "object-backed segment.\n");
  CHECK(outcome(R"([{"path": "/c/o", "data": "YQ=="}])") ==
        "400 Index 0: extraneous keys \"path\"\nInline data segments require at least one "
        "object-backed segment.\n");
  CHECK(outcome(R"([{"path": "/c/o", "foo": 1, "bar": 2}])") ==
        "400 Index 0: extraneous keys \"bar\", \"foo\"\n");
  CHECK(outcome(R"([{"path": "/c/o", "x\u00e9": 1}])") ==
        "400 Index 0: extraneous keys \"x\\u00e9\"\n");
  CHECK(outcome(R"([{"path": 5}])") == "400 Index 0: \"path\" must be a string\n");
  CHECK(outcome(R"([{"path": "/c/o", "etag": 5}])") ==
        "400 Index 0: \"etag\" must be a string or null (if provided)\n");
  CHECK(outcome(R"([{"path": "/c/o", "etag": null}])") == "OK");
  CHECK(outcome(R"([{"path": "/co"}])") ==
        "400 Index 0: path does not refer to an object. Path must be of the form "
        "/container/object.\n");
  CHECK(outcome(R"([{"path": "c/o/"}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o"}, {"path": "/c/o"}])") == "OK");
  // A repeated key counts once, its last value (json.loads).
  CHECK(outcome(R"([{"path": "/c/o", "path": 5}])") == "400 Index 0: \"path\" must be a string\n");
}

TEST_CASE("slo manifest input: size_bytes as Python's int() reads it") {
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": "x"}])") ==
        "400 Index 0: invalid size_bytes\n");
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": [1]}])") ==
        "400 Index 0: invalid size_bytes\n");
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": 0}, {"path": "/c/o2"}])") ==
        "400 Index 0: too small; each segment must be at least 1 byte.\n");
  // The last segment may be empty (or say so).
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": 0}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": -5}])") == "OK");
  auto sizes = [](std::string_view body) {
    auto r = parse_manifest_input(body, kPath);
    REQUIRE(r);
    REQUIRE(r->size() == 1);
    return r->front().size_bytes;
  };
  CHECK(sizes(R"([{"path": "/c/o", "size_bytes": true}])") == 1);
  CHECK(sizes(R"([{"path": "/c/o", "size_bytes": 1.7}])") == 1);
  CHECK(sizes(R"([{"path": "/c/o", "size_bytes": " 1_0 "}])") == 10);
  CHECK(sizes(R"([{"path": "/c/o", "size_bytes": null}])") == std::nullopt);
  // int(float('inf')) raises OverflowError, which Swift 2.30 does not catch.
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": 1e400}])") == "500 An error occurred");
}

TEST_CASE("slo manifest input: ranges") {
  CHECK(outcome(R"([{"path": "/c/o", "range": "0-1,3-4"}])") ==
        "400 Index 0: multiple ranges (only one allowed)\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "x"}])") == "400 Index 0: invalid range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": 5}])") == "400 Index 0: invalid range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "1-0"}])") == "400 Index 0: invalid range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "bytes=1-2"}])") ==
        "400 Index 0: invalid range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": ""}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o", "range": "5-", "size_bytes": 5}])") ==
        "400 Index 0: unsatisfiable range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "-0", "size_bytes": 5}])") ==
        "400 Index 0: unsatisfiable range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "1-", "size_bytes": 1}])") ==
        "400 Index 0: unsatisfiable range\n");
  CHECK(outcome(R"([{"path": "/c/o", "range": "-3", "size_bytes": 5}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o", "range": "0-1", "size_bytes": 1}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": -5, "range": "-2"}])") == "OK");
  CHECK(outcome(R"([{"path": "/c/o", "size_bytes": -5, "range": "0-2"}])") ==
        "400 Index 0: unsatisfiable range\n");
  auto r = parse_manifest_input(R"([{"path": "/c/o", "range": "-3"}])", kPath);
  REQUIRE(r);
  REQUIRE(r->front().range);
  CHECK(!r->front().range->first);
  CHECK(r->front().range->last == 3u);
}

TEST_CASE("slo manifest input: inline data") {
  CHECK(outcome(R"([{"data": "YQ=="}])") ==
        "400 Inline data segments require at least one object-backed segment.\n");
  CHECK(outcome(R"([{"data": ""}, {"path": "/c/o"}])") ==
        "400 Index 0: too small; each segment must be at least 1 byte.\n");
  for (const char* bad : {"YQ", "YQ=", "Y Q==", "Y", "Y=Q="}) {
    INFO(bad);
    CHECK(outcome(std::string(R"([{"data": ")") + bad + R"("}, {"path": "/c/o"}])") ==
          "400 Index 0: data must be valid base64\n");
  }
  CHECK(outcome(R"([{"data": 5}, {"path": "/c/o"}])") ==
        "400 Index 0: data must be valid base64\n");
  auto r = parse_manifest_input(R"([{"data": "YQ==="}, {"path": "/c/o"}])", kPath);
  REQUIRE(r);
  CHECK(r->front().is_data);
  CHECK(r->front().data == "a");
  CHECK(strict_b64decode("YWJj") == "abc");
  CHECK(strict_b64decode("=YWJj") == "abc");
  CHECK(b64encode("a") == "YQ==");
  CHECK(b64encode("ab") == "YWI=");
  CHECK(b64encode("abc") == "YWJj");
}

TEST_CASE("slo manifest input: the manifest may not name itself") {
  for (const char* self : {"/m/manifest", "m/manifest", "//m/manifest"}) {
    INFO(self);
    CHECK(outcome(std::string(R"([{"path": ")") + self + R"("}])") ==
          "400 Index 0: manifest must not include itself as a segment\n");
  }
  CHECK(outcome(R"([{"path": "/c/o \u00e9"}])", "/v1/a/c/o \xc3\xa9") ==
        "400 Index 0: manifest must not include itself as a segment\n");
  CHECK(outcome(R"([{"path": "/m/manifest2"}])") == "OK");
}

TEST_CASE("slo manifest input: where Swift 2.30 itself fails, a 500") {
  // An entry with neither key (its error line is built from bytes and str), and a number or
  // null where every entry before it was inline data ('data' in 1).
  CHECK(outcome("[{}]") == "500 An error occurred");
  CHECK(outcome(R"([{"foo": 1}])") == "500 An error occurred");
  CHECK(outcome("[1]") == "500 An error occurred");
  CHECK(outcome("[null]") == "500 An error occurred");
}

StoredSegment object(std::string name, int64_t bytes, std::string hash) {
  StoredSegment s;
  s.name = std::move(name);
  s.bytes = bytes;
  s.hash = std::move(hash);
  s.content_type = "application/octet-stream";
  s.last_modified = "2026-12-01T19:00:00.000000";
  return s;
}

TEST_CASE("slo stored manifest: Swift's json.dumps, and read back") {
  std::vector<StoredSegment> m = {object("/c/a", 5, "h1"), object("/c/\xc3\xa9", 10, "h2")};
  m[1].range = std::make_pair<int64_t, int64_t>(2, 4);
  m[1].sub_slo = true;
  StoredSegment d;
  d.is_data = true;
  d.data = "xyz";
  m.push_back(d);
  const std::string text = to_stored_json(m);
  CHECK(text ==
        "[{\"name\": \"/c/a\", \"bytes\": 5, \"hash\": \"h1\", \"content_type\": "
        "\"application/octet-stream\", \"last_modified\": \"2026-12-01T19:00:00.000000\"}, "
        "{\"name\": \"/c/\\u00e9\", \"bytes\": 10, \"hash\": \"h2\", \"content_type\": "
        "\"application/octet-stream\", \"last_modified\": \"2026-12-01T19:00:00.000000\", "
        "\"range\": \"2-4\", \"sub_slo\": true}, {\"data\": \"eHl6\"}]");
  auto back = parse_stored(text);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 3);
  CHECK((*back)[1].name == "/c/\xc3\xa9");
  CHECK((*back)[1].range == std::make_pair<int64_t, int64_t>(2, 4));
  CHECK((*back)[1].sub_slo);
  CHECK((*back)[2].data == "xyz");
  CHECK(to_raw_json(*back) ==
        "[{\"etag\": \"h1\", \"path\": \"/c/a\", \"size_bytes\": 5}, {\"etag\": \"h2\", "
        "\"path\": \"/c/\\u00e9\", \"range\": \"2-4\", \"size_bytes\": 10}, {\"data\": "
        "\"eHl6\"}]");
  CHECK(total_length(*back) == 5 + 3 + 3);
  // Swift 2.30: md5 of "h1" + "h2:2-4;" + md5hex("xyz").
  CHECK(slo_etag(*back) ==
        common::crypto::md5_hex("h1h2:2-4;" + common::crypto::md5_hex("xyz")));
  CHECK(!parse_stored("{}").ok());
  CHECK(!parse_stored("[{\"name\": \"/c/o\"}]").ok());
  // An old sub-SLO entry keeps its large object's length in swift_bytes.
  auto old = parse_stored(
      "[{\"name\": \"/c/s\", \"bytes\": 100, \"hash\": \"h\", \"sub_slo\": true, "
      "\"content_type\": \"text/plain;swift_bytes=12345\"}]");
  REQUIRE(old.ok());
  CHECK(old->front().bytes == 12345);
  CHECK(old->front().content_type == "text/plain");
}

TEST_CASE("slo ranges: byte ranges of the large object map onto segment pieces") {
  // Segments of 5, 3 (bytes 2-4 of a 10-byte object) and 3 (inline) bytes: 11 in all.
  std::vector<StoredSegment> m = {object("/c/a", 5, "h1"), object("/c/b", 10, "h2")};
  m[1].range = std::make_pair<int64_t, int64_t>(2, 4);
  StoredSegment d;
  d.is_data = true;
  d.data = "xyz";
  m.push_back(d);
  auto whole = pieces_for_range(m, 0, 10);
  REQUIRE(whole.size() == 3);
  CHECK((whole[0].index == 0 && whole[0].first == 0 && whole[0].last == 4));
  CHECK((whole[1].index == 1 && whole[1].first == 2 && whole[1].last == 4));
  CHECK((whole[2].index == 2 && whole[2].first == 0 && whole[2].last == 2));
  auto across = pieces_for_range(m, 4, 6);  // last byte of a, first two of b's range
  REQUIRE(across.size() == 2);
  CHECK((across[0].index == 0 && across[0].first == 4 && across[0].last == 4));
  CHECK((across[1].index == 1 && across[1].first == 2 && across[1].last == 3));
  auto inner = pieces_for_range(m, 6, 6);
  REQUIRE(inner.size() == 1);
  CHECK((inner[0].index == 1 && inner[0].first == 3 && inner[0].last == 3));
  auto tail = pieces_for_range(m, 9, 10);
  REQUIRE(tail.size() == 1);
  CHECK((tail[0].index == 2 && tail[0].first == 1 && tail[0].last == 2));
}

TEST_CASE("slo ranges: an empty segment in the middle gives no piece") {
  // A stored manifest with a 0-byte segment (the fuzzer's find: it gave a piece whose last
  // byte came before its first).
  std::vector<StoredSegment> m = {object("/c/a", 5, "h1"), object("/c/b", 0, "h2"),
                                  object("/c/c", 3, "h3")};
  auto across = pieces_for_range(m, 2, 6);
  REQUIRE(across.size() == 2);
  CHECK((across[0].index == 0 && across[0].first == 2 && across[0].last == 4));
  CHECK((across[1].index == 2 && across[1].first == 0 && across[1].last == 1));
}

TEST_CASE("slo bulk answers: plain, JSON and XML as Swift's bulk writes them") {
  std::vector<BulkField> fields = {{"Response Status", "400 Bad Request", false},
                                   {"Response Body", "", false}};
  std::vector<BulkError> errors = {{"/c/o", "404 Not Found"}, {"/c/p", "Etag Mismatch"}};
  CHECK(bulk_response_body("text/plain", fields, errors, "upload") ==
        "Response Body: \nResponse Status: 400 Bad Request\nErrors:\n/c/o, 404 Not Found\n"
        "/c/p, Etag Mismatch\n");
  CHECK(bulk_response_body("application/json", fields, errors, "upload") ==
        "{\"Response Status\": \"400 Bad Request\", \"Response Body\": \"\", \"Errors\": "
        "[[\"/c/o\", \"404 Not Found\"], [\"/c/p\", \"Etag Mismatch\"]]}");
  CHECK(bulk_response_body("application/xml", {{"Number Deleted", "2", true}}, {{"a&b", "x<y"}},
                           "delete") ==
        "<delete>\n<number_deleted>2</number_deleted>\n<errors>\n<object><name>a&amp;b</name>"
        "<status>x&lt;y</status></object>\n</errors>\n</delete>\n");
  CHECK(bulk_response_body("application/json", {{"Number Deleted", "2", true}}, {}, "delete") ==
        "{\"Number Deleted\": 2, \"Errors\": []}");
}

}  // namespace
}  // namespace apus::proxy::slo
