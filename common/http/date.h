// HTTP dates: formatting Date / Last-Modified and parsing If-(Un)Modified-Since.
//
// Formatting always yields the RFC 1123 form "Sun, 06 Nov 1994 08:49:37 GMT" from epoch seconds
// (UTC), written by hand: no strftime, so the C locale cannot change day or month names.
// Parsing follows what Swift does for conditional headers (Python's email.utils.parsedate,
// then datetime()): it accepts RFC 1123, RFC 850 and asctime forms and a good deal of looser
// input, *ignores* any zone (every date is read as UTC), and rejects out-of-range fields.
// Anything it cannot read yields nullopt, which callers treat as "header absent".
//
// Also holds the proleptic-Gregorian calendar arithmetic other modules need (Timestamp's
// isoformat), so it lives in one place.
//
// Thread-safe: all functions are pure, except http_date_now(), which keeps a per-thread cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace apus::common::http {

// A UTC calendar breakdown. weekday: 0 = Sunday ... 6 = Saturday.
struct CivilTime {
  int64_t year = 1970;
  int month = 1;  // 1..12
  int day = 1;    // 1..31
  int hour = 0;
  int minute = 0;
  int second = 0;
  int weekday = 4;
};

// Splits epoch seconds (may be negative) into a UTC calendar time.
CivilTime civil_from_epoch(int64_t epoch_seconds);
// Epoch seconds of a UTC calendar time; fields are not range-checked (month 1..12 expected).
int64_t epoch_from_civil(int64_t year, int month, int day, int hour, int minute, int second);

// Length of format_http_date() for years 0..9999.
inline constexpr size_t kHttpDateLength = 29;

// "Sun, 06 Nov 1994 08:49:37 GMT" for `epoch_seconds` (UTC). Years print with at least 4 digits.
std::string format_http_date(int64_t epoch_seconds);

// The Date header value for the current second. Cached per thread, so calling it for every
// response costs a clock read and a compare.
std::string http_date_now();

// Epoch seconds of an HTTP date as Swift reads If-Modified-Since / If-Unmodified-Since, or
// nullopt when Swift would ignore the header (unparseable, or fields out of range).
std::optional<int64_t> parse_http_date(std::string_view value);

}  // namespace apus::common::http
