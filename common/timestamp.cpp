#include "common/timestamp.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/http/date.h"

namespace apus::common {
namespace {

constexpr double kMaxSeconds = 1e10;  // exclusive, as Swift checks it on the float value
constexpr int64_t kFracDigits = 5;

// Python's str.strip() set for ASCII input.
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's int(s, 16) for the forms Swift meets: whitespace, an optional 0x prefix, hex
// digits. Fails on anything else and on values above UINT64_MAX.
std::optional<uint64_t> parse_hex(std::string_view s) {
  s = strip(s);
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : s) {
    const int v = hex_value(c);
    if (v < 0 || value > (UINT64_MAX >> 4)) return std::nullopt;
    value = (value << 4) | static_cast<uint64_t>(v);
  }
  return value;
}

// Rounds a checked double (0 <= d < 1e10) to 10 µs units the way "%.5f" prints it. Swift
// never keeps more precision than its text form shows, so the printed digits are the value.
int64_t raw_from_double(double d) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed, 5);
  int64_t raw = 0;
  for (char* p = buf; p != res.ptr; ++p) {
    if (*p != '.') raw = raw * 10 + (*p - '0');
  }
  return raw;
}

// Appends the normal form of `raw` to `out`.
void append_normal(int64_t raw, std::string& out) {
  char buf[32];
  char* end = buf + sizeof(buf);
  char* p = end;
  int64_t v = raw;
  for (int i = 0; i < kFracDigits; ++i) {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  *--p = '.';
  int int_digits = 0;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
    ++int_digits;
  } while (v > 0);
  while (int_digits < 10) {
    *--p = '0';
    ++int_digits;
  }
  out.append(p, end);
}

void append_hex(uint64_t v, int min_width, std::string& out) {
  char buf[16];
  char* end = buf + sizeof(buf);
  char* p = end;
  do {
    *--p = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v > 0);
  while (end - p < min_width) *--p = '0';
  out.append(p, end);
}

}  // namespace

Result<Timestamp> Timestamp::parse(std::string_view text) {
  const size_t underscore = text.find('_');
  std::string_view base = text.substr(0, underscore);
  uint64_t offset = 0;
  if (underscore != std::string_view::npos) {
    const std::string_view offset_text = text.substr(underscore + 1);
    if (offset_text.find('_') != std::string_view::npos) {
      return Status::invalid_argument("invalid timestamp offset");
    }
    if (!offset_text.empty()) {
      const std::optional<uint64_t> parsed = parse_hex(offset_text);
      if (!parsed) return Status::invalid_argument("invalid timestamp offset");
      offset = *parsed;
    }
  }
  base = strip(base);

  // Fast path: the normal form and shorter decimals ("1402464677", "1402464677.04188") hold
  // their exact value in the digits; up to 15 significant digits survive the double round trip
  // Swift makes, so the result equals the slow path's.
  {
    size_t i = 0;
    int64_t raw = 0;
    while (i < base.size() && i < 10 && is_digit(base[i])) raw = raw * 10 + (base[i++] - '0');
    if (i > 0 && (i == base.size() || base[i] == '.')) {
      size_t frac = 0;
      if (i < base.size()) {
        ++i;
        while (i < base.size() && frac < kFracDigits && is_digit(base[i])) {
          raw = raw * 10 + (base[i++] - '0');
          ++frac;
        }
      }
      if (i == base.size()) {
        for (; frac < kFracDigits; ++frac) raw *= 10;
        return Timestamp(raw, offset);
      }
    }
  }

  // Slow path: Python's float() grammar (sign, exponent, any number of digits).
  bool negative = false;
  if (!base.empty() && (base[0] == '+' || base[0] == '-')) {
    negative = base[0] == '-';
    base.remove_prefix(1);
  }
  if (base.empty() || !(is_digit(base[0]) || base[0] == '.')) {
    return Status::invalid_argument("invalid timestamp");
  }
  double d = 0;
  const auto res = std::from_chars(base.data(), base.data() + base.size(), d);
  if (res.ec != std::errc() || res.ptr != base.data() + base.size()) {
    // from_chars reports huge and tiny magnitudes as out of range where Python's float()
    // gives inf (rejected below as too large) or a value that rounds to zero.
    if (res.ec == std::errc::result_out_of_range && res.ptr == base.data() + base.size()) {
      if (negative) return Status::invalid_argument("timestamp cannot be negative");
      const bool tiny =
          base.find("e-") != std::string_view::npos || base.find("E-") != std::string_view::npos;
      if (!tiny) return Status::invalid_argument("timestamp too large");
      return Timestamp(0, offset);
    }
    return Status::invalid_argument("invalid timestamp");
  }
  if (negative) d = -d;
  return from_seconds(d, offset);
}

Result<Timestamp> Timestamp::from_raw(int64_t raw, uint64_t offset) {
  if (raw < 0) return Status::invalid_argument("timestamp cannot be negative");
  if (raw >= kMaxRaw) return Status::invalid_argument("timestamp too large");
  return Timestamp(raw, offset);
}

Result<Timestamp> Timestamp::from_seconds(double seconds, uint64_t offset) {
  if (std::isnan(seconds)) return Status::invalid_argument("timestamp is not a number");
  if (seconds < 0) return Status::invalid_argument("timestamp cannot be negative");
  if (seconds >= kMaxSeconds) return Status::invalid_argument("timestamp too large");
  if (seconds == 0) seconds = 0;  // -0.0 would print a sign
  const int64_t raw = raw_from_double(seconds);
  // Just below 10^10 the value rounds up to a normal form ("10000000000.00000") that Swift
  // accepts here but cannot parse back; refuse it so every Timestamp survives a round trip.
  if (raw >= kMaxRaw) return Status::invalid_argument("timestamp too large");
  return Timestamp(raw, offset);
}

Timestamp Timestamp::from_time_point(std::chrono::system_clock::time_point tp) {
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count();
  int64_t raw = (us + 5) / 10;  // nearest 10 µs
  if (raw < 0) raw = 0;
  if (raw >= kMaxRaw) raw = kMaxRaw - 1;
  return Timestamp(raw, 0);
}

Timestamp Timestamp::now() { return from_time_point(std::chrono::system_clock::now()); }

Result<Timestamp> Timestamp::plus_offset(uint64_t n) const {
  uint64_t sum = 0;
  if (__builtin_add_overflow(offset_, n, &sum)) {
    return Status::invalid_argument("timestamp offset too large");
  }
  return Timestamp(raw_, sum);
}

Result<Timestamp> Timestamp::plus_delta(int64_t delta) const {
  if (delta == 0) return *this;
  int64_t sum = 0;
  if (__builtin_add_overflow(raw_, delta, &sum) || sum >= kMaxRaw) {
    return Status::invalid_argument("timestamp too large");
  }
  if (sum <= 0) return Status::invalid_argument("timestamp delta too negative");
  return Timestamp(sum, offset_);
}

Result<Timestamp> Timestamp::inverted() const {
  if (offset_ != 0) return Status::invalid_argument("cannot invert timestamps with offsets");
  return from_raw(kMaxRaw - 1 - raw_);
}

std::string Timestamp::normal() const {
  std::string out;
  out.reserve(17);
  append_normal(raw_, out);
  return out;
}

std::string Timestamp::internal() const {
  std::string out;
  out.reserve(34);
  append_normal(raw_, out);
  if (offset_ != 0) {
    out.push_back('_');
    append_hex(offset_, 16, out);
  }
  return out;
}

std::string Timestamp::short_form() const {
  std::string out;
  out.reserve(34);
  append_normal(raw_, out);
  if (offset_ != 0) {
    out.push_back('_');
    append_hex(offset_, 1, out);
  }
  return out;
}

std::string Timestamp::isoformat() const {
  // Swift reads the normal form back as a double and rounds its fractional part to whole
  // microseconds in binary floating point. Near 10^10 s a double resolves only ~2 µs, so the
  // result can differ by one from the decimal digits; mirror the arithmetic, not the intent.
  double whole = 0;
  const double frac = std::modf(static_cast<double>(raw_) / kUnitsPerSecond, &whole);
  int64_t seconds = static_cast<int64_t>(whole);
  int64_t micros = static_cast<int64_t>(std::nearbyint(frac * 1e6));  // ties to even
  if (micros >= 1000000) {
    seconds += 1;
    micros -= 1000000;
  }
  const http::CivilTime t = http::civil_from_epoch(seconds);
  // Listings format one of these per row, so skip printf. Years stay within 1970..2286.
  char buf[26];
  auto put = [&buf](int pos, int64_t value, int width) {
    for (int i = pos + width - 1; i >= pos; --i) {
      buf[i] = static_cast<char>('0' + value % 10);
      value /= 10;
    }
  };
  put(0, t.year, 4);
  buf[4] = '-';
  put(5, t.month, 2);
  buf[7] = '-';
  put(8, t.day, 2);
  buf[10] = 'T';
  put(11, t.hour, 2);
  buf[13] = ':';
  put(14, t.minute, 2);
  buf[16] = ':';
  put(17, t.second, 2);
  buf[19] = '.';
  put(20, micros, 6);
  return std::string(buf, sizeof(buf));
}

Result<std::string> normalize_timestamp(std::string_view text) {
  Result<Timestamp> ts = Timestamp::parse(text);
  if (!ts.ok()) return ts.status();
  return ts->normal();
}

std::string encode_timestamps(const Timestamp& t1, const std::optional<Timestamp>& t2,
                              const std::optional<Timestamp>& t3, bool explicit_deltas) {
  std::string out = t1.short_form();
  if (!t2) return out;
  const int64_t d1 = t2->raw() - t1.raw();
  const int64_t d2 = t3 ? t3->raw() - t2->raw() : 0;
  if (!(explicit_deltas || d1 != 0 || d2 != 0)) return out;
  auto append_delta = [&out](int64_t d) {
    out.push_back(d < 0 ? '-' : '+');
    append_hex(d < 0 ? static_cast<uint64_t>(-d) : static_cast<uint64_t>(d), 1, out);
  };
  append_delta(d1);
  if (t3) append_delta(d2);
  return out;
}

Result<DecodedTimestamps> decode_timestamps(std::string_view encoded, bool explicit_deltas) {
  // Each '+' or '-' starts a delta with that sign. Only the first two deltas matter; like
  // Swift, anything after them is not examined.
  std::string_view parts[3];
  int signs[3] = {1, 1, 1};
  int count = 0;
  size_t start = 0;
  int sign = 1;
  for (size_t i = 0; i <= encoded.size() && count < 3; ++i) {
    if (i == encoded.size() || encoded[i] == '+' || encoded[i] == '-') {
      parts[count] = encoded.substr(start, i - start);
      signs[count] = sign;
      ++count;
      if (i < encoded.size()) sign = encoded[i] == '-' ? -1 : 1;
      start = i + 1;
    }
  }
  Result<Timestamp> t1 = Timestamp::parse(parts[0]);
  if (!t1.ok()) return t1.status();
  DecodedTimestamps out{*t1, std::nullopt, std::nullopt};

  // A zero delta keeps the previous component (and so its offset); a non-zero one builds a
  // fresh timestamp with offset 0.
  auto apply = [](const Timestamp& prev, std::string_view text,
                  int delta_sign) -> Result<Timestamp> {
    const std::optional<uint64_t> magnitude = parse_hex(text);
    if (!magnitude || *magnitude > static_cast<uint64_t>(INT64_MAX)) {
      return Status::invalid_argument("invalid timestamp delta");
    }
    if (*magnitude == 0) return prev;
    const int64_t delta = delta_sign * static_cast<int64_t>(*magnitude);
    int64_t raw = 0;
    if (__builtin_add_overflow(prev.raw(), delta, &raw)) {
      return Status::invalid_argument("timestamp delta out of range");
    }
    return Timestamp::from_raw(raw);
  };

  if (count > 1) {
    Result<Timestamp> t2 = apply(out.t1, parts[1], signs[1]);
    if (!t2.ok()) return t2.status();
    out.t2 = *t2;
  } else if (!explicit_deltas) {
    out.t2 = out.t1;
  }
  if (count > 2) {
    Result<Timestamp> t3 = apply(*out.t2, parts[2], signs[2]);
    if (!t3.ok()) return t3.status();
    out.t3 = *t3;
  } else if (!explicit_deltas) {
    out.t3 = out.t2;
  }
  return out;
}

namespace {
constexpr int64_t kMaxDeleteAt = 9999999999;  // ten digits, so queue names sort as numbers
}  // namespace

int64_t clamp_delete_at(int64_t epoch_seconds) {
  return epoch_seconds < 0 ? 0 : (epoch_seconds > kMaxDeleteAt ? kMaxDeleteAt : epoch_seconds);
}

int64_t clamp_delete_at(double epoch_seconds) {
  if (!(epoch_seconds > 0)) return 0;  // NaN too
  return static_cast<int64_t>(std::min(epoch_seconds, static_cast<double>(kMaxDeleteAt)));
}

std::string normalize_delete_at(int64_t epoch_seconds) {
  int64_t v = clamp_delete_at(epoch_seconds);
  char buf[16];
  for (int i = 9; i >= 0; --i) {
    buf[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return std::string(buf, 10);
}

Timestamp timestamp_or_zero(std::string_view text) {
  auto t = Timestamp::parse(text);
  return t.ok() ? *t : Timestamp();
}

}  // namespace apus::common
