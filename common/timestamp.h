// Timestamp: Swift's notion of time, which orders every write in the cluster.
//
// A Timestamp is seconds since the epoch in units of 10 µs ("raw", as Swift calls it) plus an
// "offset", a 64-bit counter that orders several states sharing one time (Swift bumps it for
// internal rewrites). Its text forms, all fixed-width so string order is time order:
//   normal    "1402464677.04188"                   (%016.05f)
//   internal  "1402464677.04188_0000000000000001"  (normal + _%016x, only when offset > 0)
//   short     "1402464677.04188_1"                 (normal + _%x, only when offset > 0)
// Valid values are 0 <= seconds < 10^10 and 0 <= offset < 16^16. Ordering is by (raw, offset).
//
// Parsing accepts what Swift's Timestamp(str) accepts in practice: "<float>[_<hex offset>]",
// with the float in any decimal or exponent form. Extra precision is rounded to 10 µs exactly
// as Swift prints it (correct rounding of the parsed double, ties to even on its exact binary
// value). Known gaps, all outside anything Swift emits: Python's "1_000" digit separators and
// a sign on the offset are rejected. Swift keeps the unrounded float in memory, so for an input
// with more than 5 decimals its ceil() (and .raw, by one unit at exact halves) can differ from
// what the same Timestamp gives after a round trip through its text form; Apus always behaves
// like the round-tripped value, which is what every Swift peer sees. Two more corners: Swift
// accepts "-0" (printing "-000000000.00000"), read here as 0; and it accepts values that round
// up to 10^10 ("9999999999.999996"), whose normal form it then cannot parse back; these are
// rejected here.
//
// Thread-compatible: a Timestamp is a 16-byte value.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace apus::common {

class Timestamp {
 public:
  static constexpr int64_t kUnitsPerSecond = 100000;         // raw units are 10 µs
  static constexpr int64_t kMaxRaw = 1'000'000'000'000'000;  // exclusive: 10^10 seconds
  static constexpr uint64_t kMaxOffset = UINT64_MAX;         // 16^16 - 1

  // 0000000000.00000, offset 0.
  constexpr Timestamp() = default;

  // Parses "<float>[_<hex offset>]" (surrounding whitespace allowed in each part). Fails with
  // InvalidArgument on garbage, negative values, values >= 10^10, or an offset >= 16^16.
  static Result<Timestamp> parse(std::string_view text);
  // From 10 µs units. Fails with InvalidArgument unless 0 <= raw < 10^15.
  static Result<Timestamp> from_raw(int64_t raw, uint64_t offset = 0);
  // From float seconds, rounded as parse() rounds. Fails like parse() (also on NaN/inf).
  static Result<Timestamp> from_seconds(double seconds, uint64_t offset = 0);
  // A wall-clock instant rounded to 10 µs, clamped into the valid range. Code that must be
  // testable takes its time source from the caller and uses this, not now().
  static Timestamp from_time_point(std::chrono::system_clock::time_point tp);
  // The current wall-clock time, offset 0.
  static Timestamp now();

  // Seconds since the epoch in 10 µs units.
  int64_t raw() const { return raw_; }
  uint64_t offset() const { return offset_; }
  // Seconds as a double (Swift's float(ts)).
  double seconds() const { return static_cast<double>(raw_) / kUnitsPerSecond; }
  // Swift's bool(ts): false only for time 0 with offset 0.
  bool is_zero() const { return raw_ == 0 && offset_ == 0; }

  // This time with the offset increased by `n` (Swift's Timestamp(ts, offset=n)). Fails with
  // InvalidArgument if the offset would exceed kMaxOffset.
  Result<Timestamp> plus_offset(uint64_t n) const;
  // This time moved by `delta` 10 µs units, offset kept (Timestamp(ts, delta=d)). Fails with
  // InvalidArgument unless the result is > 0 and < 10^10 seconds.
  Result<Timestamp> plus_delta(int64_t delta) const;
  // Swift's ~ts: a timestamp that sorts in reverse. Fails when the offset is non-zero.
  Result<Timestamp> inverted() const;

  std::string normal() const;
  std::string internal() const;
  std::string short_form() const;
  // "YYYY-MM-DDTHH:MM:SS.ffffff" (UTC, no zone): the listing `last_modified` format, with the
  // microseconds computed in floating point exactly as Swift does (off by one near 10^10 s).
  std::string isoformat() const;
  // Whole seconds rounded up (Last-Modified); offset ignored.
  int64_t ceil() const { return (raw_ + kUnitsPerSecond - 1) / kUnitsPerSecond; }

  friend auto operator<=>(const Timestamp&, const Timestamp&) = default;
  friend bool operator==(const Timestamp&, const Timestamp&) = default;

 private:
  constexpr Timestamp(int64_t raw, uint64_t offset) : raw_(raw), offset_(offset) {}

  int64_t raw_ = 0;      // 10 µs units, 0 <= raw_ < kMaxRaw; compared first
  uint64_t offset_ = 0;  // compared second
};

// Swift's normalize_timestamp(): parse() then normal().
Result<std::string> normalize_timestamp(std::string_view text);

// Up to three timestamps in one compact string (container rows, .meta file names):
// "<t1 short>[<+|-><hex t2.raw - t1.raw>[<+|-><hex t3.raw - t2.raw>]]". Deltas are written only
// when one is non-zero, or always with `explicit_deltas`. Offsets of t2 and t3 are not kept;
// t3 is ignored without t2.
std::string encode_timestamps(const Timestamp& t1, const std::optional<Timestamp>& t2 = {},
                              const std::optional<Timestamp>& t3 = {},
                              bool explicit_deltas = false);

struct DecodedTimestamps {
  Timestamp t1;
  std::optional<Timestamp> t2;  // nullopt only with explicit_deltas and no encoded delta
  std::optional<Timestamp> t3;
};

// Inverse of encode_timestamps(). A component without a delta equals the one before it
// (sharing its offset), or is nullopt when `explicit_deltas`. A component built from a
// non-zero delta has offset 0. Fails with InvalidArgument on any malformed or out-of-range
// part.
Result<DecodedTimestamps> decode_timestamps(std::string_view encoded, bool explicit_deltas = false);

// An X-Delete-At value as Swift stores it: "%010d" of the value clamped to 0..9999999999.
std::string normalize_delete_at(int64_t epoch_seconds);
// A delete-at bounded as normalize_delete_at() bounds it: 0..9999999999. The double form takes
// any value (Swift adds X-Delete-After in floating point; NaN and infinities too) without an
// overflowing conversion.
int64_t clamp_delete_at(int64_t epoch_seconds);
int64_t clamp_delete_at(double epoch_seconds);

// A stored or received timestamp string as a Timestamp; 0 for "0", "" or anything unparsable
// (Swift compares such values as the zero time).
Timestamp timestamp_or_zero(std::string_view text);

}  // namespace apus::common
