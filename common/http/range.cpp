#include "common/http/range.h"

#include <random>

#include "common/http/date.h"

namespace apus::common::http {
namespace {

// Header values reach swob as latin-1 text; these are the code points Python's str.strip()
// removes among them.
bool is_py_space(unsigned char c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0;
}

std::string_view py_strip(std::string_view s) {
  while (!s.empty() && is_py_space(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_py_space(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

uint64_t saturating_push_digit(uint64_t value, char c) {
  const uint64_t d = static_cast<uint64_t>(c - '0');
  if (value > (UINT64_MAX - d) / 10) return UINT64_MAX;
  return value * 10 + d;
}

// Python's int() as swob applies it to a range start: whitespace around, an optional '+',
// digits with single underscores between them.
std::optional<uint64_t> parse_start(std::string_view s) {
  s = py_strip(s);
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  uint64_t value = 0;
  bool prev_digit = false;
  for (char c : s) {
    if (is_digit(c)) {
      value = saturating_push_digit(value, c);
      prev_digit = true;
    } else if (c == '_' && prev_digit) {
      prev_digit = false;
    } else {
      return std::nullopt;
    }
  }
  if (!prev_digit) return std::nullopt;
  return value;
}

// swob demands str.isdigit() of a range end: plain digits only.
std::optional<uint64_t> parse_end(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    value = saturating_push_digit(value, c);
  }
  return value;
}

// All fields named `name` joined with ',' (how a WSGI server presents repeated headers), or
// nullopt when there is none.
std::optional<std::string> joined_header(const HeaderMap& headers, std::string_view name) {
  std::optional<std::string> out;
  for (const auto& [field, value] : headers) {
    if (!iequals(field, name)) continue;
    if (out) {
      out->push_back(',');
      out->append(value);
    } else {
      out.emplace(value);
    }
  }
  return out;
}


// swob's Match: a comma-separated set of (unquoted) tags; "*" matches anything.
class EtagList {
 public:
  explicit EtagList(std::string_view value) {
    size_t start = 0;
    for (;;) {
      const size_t comma = value.find(',', start);
      const std::string_view tag = py_strip(value.substr(start, comma - start));
      if (!tag.empty()) tags_.push_back(normalize_etag(tag));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  bool has(std::string_view tag) const {
    for (std::string_view t : tags_) {
      if (t == tag) return true;
    }
    return false;
  }
  bool matches(std::string_view etag) const { return has("*") || has(normalize_etag(etag)); }

 private:
  std::vector<std::string_view> tags_;  // views into the header value the caller keeps alive
};

void append_uint(uint64_t v, std::string& out) {
  char buf[24];
  char* end = buf + sizeof(buf);
  char* p = end;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  out.append(p, end);
}

size_t decimal_length(uint64_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

}  // namespace

std::string_view normalize_etag(std::string_view tag) {
  if (tag.size() >= 2 && tag.front() == '"' && tag.back() == '"') {
    tag.remove_prefix(1);
    tag.remove_suffix(1);
  }
  return tag;
}

std::optional<std::vector<RangeSpec>> parse_range_header(std::string_view raw_value) {
  std::string value;
  value.reserve(raw_value.size());
  for (char c : raw_value) {
    if (c != ' ') value.push_back(c);
  }
  if (value.size() < 6 || !istarts_with(value, "bytes=")) return std::nullopt;
  std::vector<RangeSpec> specs;
  const std::string_view set = std::string_view(value).substr(6);
  size_t start = 0;
  for (;;) {
    const size_t comma = set.find(',', start);
    const std::string_view spec = set.substr(start, comma - start);
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    const std::string_view first_text = spec.substr(0, dash);
    const std::string_view last_text = spec.substr(dash + 1);
    RangeSpec r;
    if (!first_text.empty()) {
      r.first = parse_start(first_text);
      if (!r.first) return std::nullopt;
    }
    if (!last_text.empty()) {
      r.last = parse_end(last_text);
      if (!r.last) return std::nullopt;
      if (r.first && *r.last < *r.first) return std::nullopt;
    } else if (!r.first) {
      return std::nullopt;
    }
    specs.push_back(r);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return specs;
}

std::vector<ByteRange> ranges_for_length(const std::vector<RangeSpec>& specs, uint64_t length) {
  std::vector<ByteRange> out;
  for (const RangeSpec& s : specs) {
    if (!s.first) {
      const uint64_t suffix = *s.last;
      if (suffix == 0) continue;  // "-0" asks for nothing
      out.push_back({suffix > length ? 0 : length - suffix, length});
    } else if (*s.first < length) {
      const uint64_t end = !s.last || *s.last >= length ? length : *s.last + 1;
      out.push_back({*s.first, end});
    }
  }

  // RFC 7233 §6.1 lets servers refuse range sets built to amplify work; these are Swift's
  // thresholds, applied after the unsatisfiable specs are gone.
  if (out.size() > kMaxRanges) return {};
  size_t overlaps = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    for (size_t j = i + 1; j < out.size(); ++j) {
      const uint64_t s1 = out[i].start, e1 = out[i].end, s2 = out[j].start, e2 = out[j].end;
      if ((s1 < s2 && s2 < e1) || (s1 < e2 && e2 < e1) || (s2 < s1 && s1 < e2) ||
          (s2 < e1 && e1 < e2)) {
        if (++overlaps > kMaxRangeOverlaps) return {};
      }
    }
  }
  if (out.size() >= kMaxNonAscendingRanges) {
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      const bool descends = out[i].start > out[i + 1].start ||
                            (out[i].start == out[i + 1].start && out[i].end > out[i + 1].end);
      if (descends) return {};
    }
  }
  return out;
}

RangeDecision evaluate_range(std::optional<std::string_view> range_header, uint64_t length) {
  RangeDecision decision;
  if (!range_header) return decision;
  std::optional<std::vector<RangeSpec>> specs = parse_range_header(*range_header);
  if (!specs) return decision;
  std::vector<ByteRange> ranges = ranges_for_length(*specs, length);
  if (ranges.empty()) {
    decision.outcome = RangeOutcome::kUnsatisfiable;
  } else if (length > 0) {
    // An empty body can only be "satisfied" by suffix ranges, and there is no byte to name
    // in a Content-Range, so Swift serves it whole.
    decision.outcome = RangeOutcome::kPartial;
    decision.ranges = std::move(ranges);
  }
  return decision;
}

std::string content_range_value(const ByteRange& r, uint64_t length) {
  std::string out = "bytes ";
  append_uint(r.start, out);
  out.push_back('-');
  append_uint(r.end - 1, out);
  out.push_back('/');
  append_uint(length, out);
  return out;
}

std::string unsatisfied_content_range(uint64_t length) {
  std::string out = "bytes */";
  append_uint(length, out);
  return out;
}

std::string random_boundary() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  const uint64_t high = engine();
  return boundary_from_bits(high, engine());
}

std::string boundary_from_bits(uint64_t high, uint64_t low) {
  std::string out(32, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<size_t>(i)] = "0123456789abcdef"[high & 0xf];
    out[static_cast<size_t>(i) + 16] = "0123456789abcdef"[low & 0xf];
    high >>= 4;
    low >>= 4;
  }
  return out;
}

std::string multipart_content_type(std::string_view boundary) {
  std::string out = "multipart/byteranges;boundary=";
  out.append(boundary);
  return out;
}

std::string multipart_part_header(std::string_view boundary, std::string_view content_type,
                                  const ByteRange& r, uint64_t length) {
  std::string out;
  out.reserve(boundary.size() + content_type.size() + 96);
  out.append("--").append(boundary).append("\r\nContent-Type: ").append(content_type);
  out.append("\r\nContent-Range: ").append(content_range_value(r, length)).append("\r\n\r\n");
  return out;
}

std::string multipart_terminator(std::string_view boundary) {
  std::string out = "--";
  out.append(boundary).append("--");
  return out;
}

uint64_t multipart_body_length(const std::vector<ByteRange>& ranges, std::string_view boundary,
                               std::string_view content_type, uint64_t length) {
  constexpr std::string_view kFixed =
      "--\r\nContent-Type: \r\nContent-Range: bytes -/\r\n\r\n"  // part header sans values
      "\r\n";                                                    // after the part's bytes
  uint64_t total = 0;
  for (const ByteRange& r : ranges) {
    total += kFixed.size() + boundary.size() + content_type.size() + decimal_length(r.start) +
             decimal_length(r.end - 1) + decimal_length(length) + r.size();
  }
  return total + boundary.size() + 4;  // "--B--"
}

ConditionalOutcome evaluate_conditional(const HeaderMap& request_headers,
                                        const ResourceState& resource) {
  const std::string_view etag = normalize_etag(resource.etag);
  const std::optional<std::string> if_none_match = joined_header(request_headers, "If-None-Match");
  if (!etag.empty() && if_none_match && EtagList(*if_none_match).matches(etag)) {
    return ConditionalOutcome::kNotModified;
  }
  const std::optional<std::string> if_match = joined_header(request_headers, "If-Match");
  if (if_match) {
    const EtagList tags(*if_match);
    if (!etag.empty() && !tags.matches(etag)) return ConditionalOutcome::kPreconditionFailed;
    // RFC 7232 §3.1: "*" asserts that a current representation exists.
    if (resource.not_found && tags.has("*")) return ConditionalOutcome::kPreconditionFailed;
  }
  if (!resource.last_modified) return ConditionalOutcome::kProceed;
  const int64_t last_modified = *resource.last_modified;
  if (std::optional<std::string> ims = joined_header(request_headers, "If-Modified-Since")) {
    const std::optional<int64_t> since = parse_http_date(*ims);
    if (since && last_modified <= *since) return ConditionalOutcome::kNotModified;
  }
  if (std::optional<std::string> ius = joined_header(request_headers, "If-Unmodified-Since")) {
    const std::optional<int64_t> since = parse_http_date(*ius);
    if (since && last_modified > *since) return ConditionalOutcome::kPreconditionFailed;
  }
  return ConditionalOutcome::kProceed;
}

}  // namespace apus::common::http
