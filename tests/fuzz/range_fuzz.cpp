// Fuzzes the Range and conditional-request evaluation of common/http/range.h with what a client
// controls: the Range header and the If-* headers, against a body length from the input.
//
// Input (text, so the seed corpus reads as requests): the first line is the object length in
// decimal (anything else means 0), the second line the Range value, and every further line a
// "Name: value" request header for evaluate_conditional().
//
// Besides the sanitizers, it checks what the object server relies on: a 206 names only
// non-empty ranges inside the body, at most kMaxRanges of them, and multipart_body_length()
// equals the length of the parts as they are written.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/http/headers.h"
#include "common/http/range.h"

namespace http = apus::common::http;

namespace {

// Stops the run with a message libFuzzer shows next to the input that caused it.
void fail(const char* what) {
  std::fprintf(stderr, "range_fuzz: %s\n", what);
  std::abort();
}

std::string_view next_line(std::string_view& rest) {
  size_t eol = rest.find('\n');
  std::string_view line = rest.substr(0, eol);
  rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
  return line;
}

uint64_t parse_length(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    if (v > (UINT64_MAX - 9) / 10) return v;  // saturate instead of wrapping
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

void check_ranges(std::string_view range, uint64_t length) {
  http::RangeDecision d = http::evaluate_range(range, length);
  if (d.outcome != http::RangeOutcome::kPartial) {
    if (!d.ranges.empty()) fail("ranges given without a 206");
    return;
  }
  if (d.ranges.empty()) fail("206 without a range");
  if (d.ranges.size() > http::kMaxRanges) fail("more ranges than kMaxRanges");
  const std::string boundary = http::boundary_from_bits(0x0123456789abcdef, 0xfedcba9876543210);
  const std::string_view type = "application/octet-stream";
  uint64_t written = 0;
  for (const http::ByteRange& r : d.ranges) {
    if (r.start >= r.end || r.end > length) fail("range outside the body or empty");
    (void)http::content_range_value(r, length);
    written += http::multipart_part_header(boundary, type, r, length).size() + r.size() + 2;
  }
  written += http::multipart_terminator(boundary).size();
  if (written != http::multipart_body_length(d.ranges, boundary, type, length)) {
    fail("multipart_body_length differs from the parts written");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const uint64_t length = parse_length(next_line(rest));
  const std::string_view range = next_line(rest);
  check_ranges(range, length);

  http::HeaderMap headers;
  while (!rest.empty()) {
    std::string_view line = next_line(rest);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    headers.add(line.substr(0, colon), value);
  }
  http::ResourceState found{"\"d41d8cd98f00b204e9800998ecf8427e\"", 1500000000, false};
  (void)http::evaluate_conditional(headers, found);
  http::ResourceState missing{"", std::nullopt, true};
  (void)http::evaluate_conditional(headers, missing);
  return 0;
}
