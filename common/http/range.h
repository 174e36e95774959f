// Range and conditional requests, evaluated the way Swift's object server (swob) does.
//
// Range: parse_range_header() reads a `bytes=` header into specs; a syntactically invalid header
// is ignored (served whole), as RFC 7233 requires. ranges_for_length() resolves the specs against
// the object length into half-open byte ranges, dropping unsatisfiable ones and refusing
// "egregious" sets (DoS guard: > 50 ranges, > 2 overlapping pairs, or >= 8 ranges out of
// order). evaluate_range() wraps both into the response decision. HEAD requests never apply
// Range in Swift; callers skip evaluation for them.
//
// Conditional requests: evaluate_conditional() applies If-None-Match, If-Match,
// If-Modified-Since and If-Unmodified-Since in Swift's order, before any Range handling, for
// GET and HEAD alike (and on a 404).
//
// The multipart/byteranges helpers build the exact byte layout Swift sends for several ranges.
//
// Thread-safe: all functions are pure, except random_boundary(), which uses a per-thread engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/headers.h"

namespace apus::common::http {

// Swift's limits on one Range header (swob MAX_RANGES, MAX_RANGE_OVERLAPS,
// MAX_NONASCENDING_RANGES): past them the whole header is answered 416.
inline constexpr size_t kMaxRanges = 50;
inline constexpr size_t kMaxRangeOverlaps = 2;
inline constexpr size_t kMaxNonAscendingRanges = 8;

// One byte-range-spec. "a-b": first=a, last=b. "a-": last unset. "-n" (suffix): first unset,
// last=n. Numbers too large for 64 bits saturate, which resolves the same way.
struct RangeSpec {
  std::optional<uint64_t> first;
  std::optional<uint64_t> last;
  friend bool operator==(const RangeSpec&, const RangeSpec&) = default;
};

// A resolved range [start, end), end exclusive.
struct ByteRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - start; }
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// The specs of a Range header value, or nullopt when Swift ignores the header (missing
// "bytes=", a spec without '-', "-", non-numeric parts, last < first, an empty spec). Spaces
// anywhere are removed first.
std::optional<std::vector<RangeSpec>> parse_range_header(std::string_view value);

// Resolves specs against a body of `length` bytes in request order. An empty result means
// unsatisfiable (416): nothing left after dropping "-0" and starts >= length, or an egregious
// set. A suffix longer than the body selects all of it.
std::vector<ByteRange> ranges_for_length(const std::vector<RangeSpec>& specs, uint64_t length);

enum class RangeOutcome {
  kWhole,          // 200 with the full body: no/ignored header, or an empty body with ranges
  kPartial,        // 206; one range → Content-Range, several → multipart/byteranges
  kUnsatisfiable,  // 416 with Content-Range: bytes */<length> (see unsatisfied_content_range)
};

struct RangeDecision {
  RangeOutcome outcome = RangeOutcome::kWhole;
  std::vector<ByteRange> ranges;  // non-empty only for kPartial
};

// The full swob decision for a GET of `length` bytes with this Range header (nullopt when
// the request has none). Note Swift answers 416 for "bytes=0-" on an empty body, but 200 for a
// suffix range such as "bytes=-5" there.
RangeDecision evaluate_range(std::optional<std::string_view> range_header, uint64_t length);

// "bytes <start>-<end-1>/<length>" for a Content-Range header. REQUIRES: r.end > r.start.
std::string content_range_value(const ByteRange& r, uint64_t length);
// "bytes */<length>" for a 416.
std::string unsatisfied_content_range(uint64_t length);

// A fresh boundary: 32 lowercase hex characters from a per-thread random engine.
std::string random_boundary();
// The boundary for 128 given bits, as Swift prints them ("%.32x"), for tests.
std::string boundary_from_bits(uint64_t high, uint64_t low);
// "multipart/byteranges;boundary=<boundary>": the 206 Content-Type for several ranges.
std::string multipart_content_type(std::string_view boundary);
// "--B\r\nContent-Type: <type>\r\nContent-Range: bytes a-b/len\r\n\r\n": what precedes the bytes
// of one part. Each part's bytes are followed by "\r\n".
std::string multipart_part_header(std::string_view boundary, std::string_view content_type,
                                  const ByteRange& r, uint64_t length);
// "--B--": closes the body after the last part's "\r\n".
std::string multipart_terminator(std::string_view boundary);
// The Content-Length of the whole multipart body for these ranges.
uint64_t multipart_body_length(const std::vector<ByteRange>& ranges, std::string_view boundary,
                               std::string_view content_type, uint64_t length);

// An entity tag without its surrounding double quotes ("abc" -> abc), as Swift compares them.
std::string_view normalize_etag(std::string_view tag);

enum class ConditionalOutcome {
  kProceed,             // answer normally (then apply Range for GET)
  kNotModified,         // 304, empty body
  kPreconditionFailed,  // 412, empty body
};

// What the server knows about the resource when it evaluates the conditions.
struct ResourceState {
  // The entity tag compared with If-(None-)Match; empty when there is none (e.g. a 404).
  // Surrounding quotes are ignored.
  std::string_view etag;
  // Last-Modified in epoch seconds, already rounded up (Timestamp::ceil()); nullopt if none.
  std::optional<int64_t> last_modified;
  // True when the response would be 404: then "If-Match: *" fails with 412.
  bool not_found = false;
};

// Swift's order: If-None-Match matching the etag (or "*") → 304; If-Match present without
// the etag → 412; on a 404, If-Match containing "*" → 412; If-Modified-Since >= Last-Modified
// → 304; If-Unmodified-Since < Last-Modified → 412. Etag lists are comma-separated; a header
// present but empty still counts (so "If-Match:" fails). Unparseable dates are ignored.
// Repeated header fields are joined with ',' as a WSGI server would.
ConditionalOutcome evaluate_conditional(const HeaderMap& request_headers,
                                        const ResourceState& resource);

}  // namespace apus::common::http
