#include "common/http/range.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/unit/common/swift_vectors.h"

namespace apus::common::http {
namespace {

std::string show(const std::vector<ByteRange>& ranges) {
  std::string out;
  for (const ByteRange& r : ranges) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.start) + "-" + std::to_string(r.end);
  }
  return out;
}

std::string resolve(std::string_view header, uint64_t length) {
  const std::optional<std::vector<RangeSpec>> specs = parse_range_header(header);
  if (!specs) return "ignored";
  return show(ranges_for_length(*specs, length));
}

TEST_CASE("parse_range_header: syntax") {
  using V = std::vector<RangeSpec>;
  CHECK(parse_range_header("bytes=0-99") == V{{0, 99}});
  CHECK(parse_range_header("bytes=5-") == V{{5, std::nullopt}});
  CHECK(parse_range_header("bytes=-5") == V{{std::nullopt, 5}});
  CHECK(parse_range_header("Bytes = 1 - 2 , 4-") == V{{1, 2}, {4, std::nullopt}});
  CHECK(parse_range_header("bytes=+3-4") == V{{3, 4}});  // Python's int() takes a sign
  CHECK(parse_range_header("bytes=1_0-20") == V{{10, 20}});
  CHECK(parse_range_header("bytes=0-99999999999999999999999") == V{{0, UINT64_MAX}});
  for (const char* bad : {"", "bytes", "bytes=", "byte=0-1", "bytes=5-3", "bytes=-", "bytes=3",
                          "bytes=a-3", "bytes=1-a", "bytes=--0", "bytes=0-1,", "bytes=3-+4",
                          "bytes=10-2_0", "bytes=0-1,bytes=2-3", "bytes=0x1-2"}) {
    INFO(bad);
    CHECK_FALSE(parse_range_header(bad).has_value());
  }
}

TEST_CASE("ranges_for_length: resolution rules") {
  CHECK(resolve("bytes=0-0", 10) == "0-1");
  CHECK(resolve("bytes=0-10", 10) == "0-10");
  CHECK(resolve("bytes=9-", 10) == "9-10");
  CHECK(resolve("bytes=10-", 10) == "");  // start past the end: dropped
  CHECK(resolve("bytes=-3", 10) == "7-10");
  CHECK(resolve("bytes=-11", 10) == "0-10");  // longer suffix: everything
  CHECK(resolve("bytes=-0", 10) == "");
  CHECK(resolve("bytes=-0,2-3", 10) == "2-4");
  CHECK(resolve("bytes=3-4,0-1", 10) == "3-5,0-2");  // request order kept
  // More than two overlapping pairs is egregious.
  CHECK(resolve("bytes=0-3,2-5,4-7", 10) == "0-4,2-6,4-8");          // two pairs overlap
  CHECK(resolve("bytes=0-5,1-6,2-7", 10) == "");                     // three pairs do
  CHECK(resolve("bytes=0-0,0-0,0-0,0-0", 10) == "0-1,0-1,0-1,0-1");  // identical: no overlap
  // Eight or more ranges must ascend.
  CHECK(resolve("bytes=6-6,5-5,4-4,3-3,2-2,1-1,0-0", 10) != "");
  CHECK(resolve("bytes=7-7,6-6,5-5,4-4,3-3,2-2,1-1,0-0", 10) == "");
  std::string fifty = "bytes=0-0", fifty_one;
  for (int i = 1; i < 50; ++i) fifty += "," + std::to_string(i) + "-" + std::to_string(i);
  fifty_one = fifty + ",50-50";
  CHECK(resolve(fifty, 100) != "");
  CHECK(resolve(fifty_one, 100) == "");
  CHECK(resolve(fifty_one, 50) != "");  // the 51st is dropped before counting
}

TEST_CASE("evaluate_range: outcomes") {
  CHECK(evaluate_range(std::nullopt, 10).outcome == RangeOutcome::kWhole);
  CHECK(evaluate_range("bytes=5-3", 10).outcome == RangeOutcome::kWhole);
  CHECK(evaluate_range("bytes=10-", 10).outcome == RangeOutcome::kUnsatisfiable);
  const RangeDecision d = evaluate_range("bytes=1-2", 10);
  CHECK(d.outcome == RangeOutcome::kPartial);
  CHECK(show(d.ranges) == "1-3");
  // Empty body: suffix ranges are served whole, others are unsatisfiable.
  CHECK(evaluate_range("bytes=-5", 0).outcome == RangeOutcome::kWhole);
  CHECK(evaluate_range("bytes=0-", 0).outcome == RangeOutcome::kUnsatisfiable);
  CHECK(evaluate_range("bytes=-0", 0).outcome == RangeOutcome::kUnsatisfiable);
}

TEST_CASE("multipart/byteranges layout") {
  CHECK(content_range_value({0, 10}, 10) == "bytes 0-9/10");
  CHECK(unsatisfied_content_range(42) == "bytes */42");
  const std::string b = boundary_from_bits(0x0123456789abcdefULL, 0xfULL);
  CHECK(b == "0123456789abcdef000000000000000f");
  const std::string rb = random_boundary();
  CHECK(rb.size() == 32);
  CHECK(rb.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(rb != random_boundary());
  CHECK(multipart_content_type(b) == "multipart/byteranges;boundary=" + b);
  CHECK(multipart_part_header("B", "text/plain", {2, 5}, 100) ==
        "--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 2-4/100\r\n\r\n");
  CHECK(multipart_terminator("B") == "--B--");

  // The announced length equals the assembled body.
  const std::string data = "0123456789abcdefghij";
  const std::vector<ByteRange> ranges = {{0, 3}, {15, 20}, {9, 10}};
  std::string body;
  for (const ByteRange& r : ranges) {
    body += multipart_part_header(b, "application/octet-stream", r, data.size());
    body += data.substr(r.start, r.size()) + "\r\n";
  }
  body += multipart_terminator(b);
  CHECK(multipart_body_length(ranges, b, "application/octet-stream", data.size()) == body.size());
}

TEST_CASE("evaluate_conditional: Swift's order and rules") {
  const int64_t lm = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  const ResourceState found{"abc", lm, false};
  const ResourceState missing{"", std::nullopt, true};
  auto eval = [](std::initializer_list<std::pair<const char*, const char*>> hs,
                 const ResourceState& r) {
    HeaderMap h;
    for (const auto& [k, v] : hs) h.add(k, v);
    return evaluate_conditional(h, r);
  };
  using C = ConditionalOutcome;
  CHECK(eval({}, found) == C::kProceed);
  CHECK(eval({{"If-None-Match", "abc"}}, found) == C::kNotModified);
  CHECK(eval({{"If-None-Match", "\"abc\""}}, found) == C::kNotModified);
  CHECK(eval({{"If-None-Match", "*"}}, found) == C::kNotModified);
  CHECK(eval({{"If-None-Match", "x, y"}}, found) == C::kProceed);
  CHECK(eval({{"If-None-Match", "*"}}, missing) == C::kProceed);
  CHECK(eval({{"If-Match", "x, \"abc\""}}, found) == C::kProceed);
  CHECK(eval({{"If-Match", "x"}}, found) == C::kPreconditionFailed);
  CHECK(eval({{"If-Match", ""}}, found) == C::kPreconditionFailed);
  CHECK(eval({{"If-Match", "W/\"abc\""}}, found) == C::kPreconditionFailed);
  CHECK(eval({{"If-Match", "*"}}, missing) == C::kPreconditionFailed);
  CHECK(eval({{"If-Match", "x"}}, missing) == C::kProceed);
  // If-None-Match wins over a failing If-Match.
  CHECK(eval({{"If-Match", "x"}, {"If-None-Match", "abc"}}, found) == C::kNotModified);
  // Repeated fields are joined.
  CHECK(eval({{"If-Match", "x"}, {"if-match", "abc"}}, found) == C::kProceed);

  CHECK(eval({{"If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"}}, found) == C::kNotModified);
  CHECK(eval({{"If-Modified-Since", "Sun, 06 Nov 1994 08:49:36 GMT"}}, found) == C::kProceed);
  CHECK(eval({{"If-Modified-Since", "garbage"}}, found) == C::kProceed);
  CHECK(eval({{"If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:36 GMT"}}, found) ==
        C::kPreconditionFailed);
  CHECK(eval({{"If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:37 GMT"}}, found) == C::kProceed);
  CHECK(eval({{"If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:36 GMT"}}, missing) == C::kProceed);
  // Matching If-Match does not stop the date checks.
  CHECK(eval({{"If-Match", "abc"}, {"If-Modified-Since", "Sun, 06 Nov 1994 08:49:38 GMT"}},
             found) == C::kNotModified);
}

TEST_CASE("Range handling matches Swift on every vector") {
  const auto& vectors = testing::swift_vectors("range");
  CHECK(vectors.size() > 500);
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 4);
    const std::string header = testing::unhex(v[0]);
    const uint64_t length = std::stoull(v[1]);
    INFO("Range: '", header, "' length ", length);
    const RangeDecision d = evaluate_range(header, length);
    const char* status = d.outcome == RangeOutcome::kWhole     ? "200"
                         : d.outcome == RangeOutcome::kPartial ? "206"
                                                               : "416";
    CHECK(status == v[2]);
    CHECK((d.ranges.empty() ? "-" : show(d.ranges)) == v[3]);
  }
}

TEST_CASE("Conditional requests match Swift on every vector") {
  const auto& vectors = testing::swift_vectors("cond");
  CHECK(vectors.size() > 500);
  const char* names[] = {"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"};
  for (const auto& v : vectors) {
    REQUIRE(v.size() == 8);
    HeaderMap headers;
    for (int i = 0; i < 4; ++i) {
      if (v[3 + i] != "-") headers.add(names[i], testing::unhex(v[3 + i]));
    }
    const std::string etag = testing::unhex(v[1]);
    ResourceState state{etag, std::nullopt, v[0] == "404"};
    if (v[2] != "-") state.last_modified = std::stoll(v[2]);
    INFO("status ", v[0], " etag '", etag, "' lm ", v[2], " im ", v[3], " inm ", v[4], " ims ",
         v[5], " ius ", v[6]);
    const ConditionalOutcome c = evaluate_conditional(headers, state);
    const std::string result = c == ConditionalOutcome::kNotModified          ? "304"
                               : c == ConditionalOutcome::kPreconditionFailed ? "412"
                                                                              : v[0];
    CHECK(result == v[7]);
  }
}

}  // namespace
}  // namespace apus::common::http
