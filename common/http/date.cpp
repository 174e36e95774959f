#include "common/http/date.h"

#include <array>
#include <chrono>
#include <vector>

namespace apus::common::http {
namespace {

constexpr std::array<std::string_view, 7> kDayAbbrev = {"Sun", "Mon", "Tue", "Wed",
                                                        "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 12> kMonthAbbrev = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Month and day names the parser knows, as Python's email._parseaddr lists them (lowercase).
// Entries 12..23 are the full names; "may" appears twice and the first wins, as in Python.
constexpr std::array<std::string_view, 24> kParseMonths = {
    "jan", "feb",  "mar",  "apr",    "may",       "jun",      "jul",      "aug",
    "sep", "oct",  "nov",  "dec",    "january",   "february", "march",    "april",
    "may", "june", "july", "august", "september", "october",  "november", "december"};
constexpr std::array<std::string_view, 7> kParseDays = {"mon", "tue", "wed", "thu",
                                                        "fri", "sat", "sun"};

constexpr int64_t kSecondsPerDay = 86400;

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Days since 1970-01-01 of a proleptic Gregorian date. The calendar repeats every 400 years
// (146097 days); counting years from March puts the leap day last, so day-of-year is linear.
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = floor_div(y, 400);
  const int64_t year_of_era = y - era * 400;
  const int64_t day_of_year = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

void civil_from_days(int64_t days, int64_t& y, int& m, int& d) {
  days += 719468;  // shift the epoch to 0000-03-01
  const int64_t era = floor_div(days, 146097);
  const int64_t day_of_era = days - era * 146097;
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_from_march = (5 * day_of_year + 2) / 153;
  d = static_cast<int>(day_of_year - (153 * month_from_march + 2) / 5 + 1);
  m = static_cast<int>(month_from_march < 10 ? month_from_march + 3 : month_from_march - 9);
  y = year_of_era + era * 400 + (m <= 2 ? 1 : 0);
}

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

char* put2(char* p, int v) {
  *p++ = static_cast<char>('0' + v / 10);
  *p++ = static_cast<char>('0' + v % 10);
  return p;
}

// Header values reach Swift as latin-1 decoded text, and Python's str.split() breaks on the
// Unicode whitespace among those code points; mirror that set byte for byte.
bool is_py_space(unsigned char c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0;
}

// Latin-1 characters for which Python's str.isdigit() is true.
bool is_py_digit(unsigned char c) {
  return (c >= '0' && c <= '9') || c == 0xb2 || c == 0xb3 || c == 0xb9;
}

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
    const size_t start = i;
    while (i < s.size() && !is_py_space(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Python's int(s) for a whitespace-free token: optional sign, digits with single underscores
// between them. Values too large for any calendar field saturate instead of overflowing.
std::optional<int64_t> py_int(std::string_view s) {
  constexpr int64_t kSaturate = int64_t{1} << 40;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  int64_t value = 0;
  bool prev_digit = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      value = value >= kSaturate ? kSaturate : value * 10 + (c - '0');
      prev_digit = true;
    } else if (c == '_' && prev_digit) {
      prev_digit = false;
    } else {
      return std::nullopt;
    }
  }
  if (!prev_digit) return std::nullopt;  // trailing underscore
  return negative ? -value : value;
}

int month_index(std::string_view lowered) {
  for (size_t i = 0; i < kParseMonths.size(); ++i) {
    if (kParseMonths[i] == lowered) return static_cast<int>(i);
  }
  return -1;
}

bool is_day_name(std::string_view lowered) {
  for (std::string_view d : kParseDays) {
    if (d == lowered) return true;
  }
  return false;
}

}  // namespace

CivilTime civil_from_epoch(int64_t epoch_seconds) {
  const int64_t days = floor_div(epoch_seconds, kSecondsPerDay);
  const int64_t secs = epoch_seconds - days * kSecondsPerDay;
  CivilTime t;
  civil_from_days(days, t.year, t.month, t.day);
  t.hour = static_cast<int>(secs / 3600);
  t.minute = static_cast<int>(secs / 60 % 60);
  t.second = static_cast<int>(secs % 60);
  const int64_t weekday = (days + 4) % 7;  // 1970-01-01 was a Thursday
  t.weekday = static_cast<int>(weekday < 0 ? weekday + 7 : weekday);
  return t;
}

int64_t epoch_from_civil(int64_t year, int month, int day, int hour, int minute, int second) {
  return days_from_civil(year, month, day) * kSecondsPerDay + hour * 3600 + minute * 60 + second;
}

std::string format_http_date(int64_t epoch_seconds) {
  const CivilTime t = civil_from_epoch(epoch_seconds);
  char buf[64];
  char* p = buf;
  for (char c : kDayAbbrev[t.weekday]) *p++ = c;
  *p++ = ',';
  *p++ = ' ';
  p = put2(p, t.day);
  *p++ = ' ';
  for (char c : kMonthAbbrev[t.month - 1]) *p++ = c;
  *p++ = ' ';
  int64_t year = t.year;
  if (year < 0) {
    *p++ = '-';
    year = -year;
  }
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + year % 10);
    year /= 10;
  } while (year > 0);
  while (n < 4) digits[n++] = '0';
  while (n > 0) *p++ = digits[--n];
  *p++ = ' ';
  p = put2(p, t.hour);
  *p++ = ':';
  p = put2(p, t.minute);
  *p++ = ':';
  p = put2(p, t.second);
  for (char c : std::string_view(" GMT")) *p++ = c;
  return std::string(buf, p);
}

std::string http_date_now() {
  struct Cache {
    int64_t second = INT64_MIN;
    std::string value;
  };
  thread_local Cache cache;
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (now != cache.second) {
    cache.value = format_http_date(now);
    cache.second = now;
  }
  return cache.value;
}

// The steps (and their odd corners, such as swapping fields that look misplaced) follow
// Python's email._parseaddr._parsedate_tz, which is what swob applies to these headers; the
// range checks at the end are the ones datetime() makes. The zone is parsed by Python but then
// dropped by parsedate(), so it is skipped here.
std::optional<int64_t> parse_http_date(std::string_view value) {
  std::vector<std::string_view> data = split_ws(value);
  if (data.empty()) return std::nullopt;
  if (data[0].back() == ',' || is_day_name(ascii_lower(data[0]))) {
    data.erase(data.begin());
  } else if (size_t comma = data[0].rfind(','); comma != std::string_view::npos) {
    data[0] = data[0].substr(comma + 1);
  }
  if (data.size() == 3) {  // RFC 850: 06-Nov-94 08:49:37 GMT
    std::vector<std::string_view> stuff = split_on(data[0], '-');
    if (stuff.size() == 3) {
      stuff.push_back(data[1]);
      stuff.push_back(data[2]);
      data = std::move(stuff);
    }
  }
  if (data.size() == 4) {  // the zone may be glued to the last field
    std::string_view s = data[3];
    size_t i = s.find('+');
    if (i == std::string_view::npos) i = s.find('-');
    if (i != std::string_view::npos && i > 0) {
      data[3] = s.substr(0, i);
      data.push_back(s.substr(i));
    } else {
      data.push_back(std::string_view());
    }
  }
  if (data.size() < 5) return std::nullopt;
  std::string_view dd = data[0];
  std::string_view yy = data[2];
  std::string_view tm = data[3];
  std::string_view tz = data[4];
  if (dd.empty() || data[1].empty() || yy.empty()) return std::nullopt;
  std::string mm = ascii_lower(data[1]);
  int month = month_index(mm);
  std::string dd_holder;
  if (month < 0) {
    dd_holder = mm;  // the fields were day-first the other way round
    mm = ascii_lower(dd);
    dd = dd_holder;
    month = month_index(mm);
    if (month < 0) return std::nullopt;
  }
  month = month % 12 + 1;
  if (dd.back() == ',') dd.remove_suffix(1);
  if (size_t colon = yy.find(':'); colon != std::string_view::npos && colon > 0) {
    std::swap(yy, tm);
  }
  if (yy.empty()) return std::nullopt;
  if (yy.back() == ',') {
    yy.remove_suffix(1);
    if (yy.empty()) return std::nullopt;
  }
  if (!is_py_digit(static_cast<unsigned char>(yy[0]))) std::swap(yy, tz);
  if (tm.empty()) return std::nullopt;
  if (tm.back() == ',') tm.remove_suffix(1);
  std::vector<std::string_view> hms = split_on(tm, ':');
  std::string_view thh, tmm, tss = "0";
  if (hms.size() == 2) {
    thh = hms[0];
    tmm = hms[1];
  } else if (hms.size() == 3) {
    thh = hms[0];
    tmm = hms[1];
    tss = hms[2];
  } else if (hms.size() == 1 && tm.find('.') != std::string_view::npos) {
    hms = split_on(tm, '.');
    if (hms.size() < 2 || hms.size() > 3) return std::nullopt;
    thh = hms[0];
    tmm = hms[1];
    if (hms.size() == 3) tss = hms[2];
  } else {
    return std::nullopt;
  }
  const std::optional<int64_t> year = py_int(yy), day = py_int(dd), hour = py_int(thh),
                               minute = py_int(tmm), second = py_int(tss);
  if (!year || !day || !hour || !minute || !second) return std::nullopt;
  int64_t y = *year;
  if (y < 100) y += y > 68 ? 1900 : 2000;  // POSIX two-digit years
  if (y < 1 || y > 9999) return std::nullopt;
  if (*day < 1 || *day > days_in_month(y, month)) return std::nullopt;
  if (*hour < 0 || *hour > 23 || *minute < 0 || *minute > 59 || *second < 0 || *second > 59) {
    return std::nullopt;
  }
  return epoch_from_civil(y, month, static_cast<int>(*day), static_cast<int>(*hour),
                          static_cast<int>(*minute), static_cast<int>(*second));
}

}  // namespace apus::common::http
