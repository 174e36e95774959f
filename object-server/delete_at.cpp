#include "object-server/delete_at.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

#include "common/config/config.h"

namespace apus::object {

namespace {

constexpr int64_t kMaxDeleteAt = 9999999999;
constexpr std::string_view kSpace = " \t\n\r\v\f";

// `text` without Python's surrounding whitespace, and whether it carried a '-' (a '+' or '-' is
// removed).
std::string_view strip_sign(std::string_view text, bool* negative) {
  size_t b = text.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  text = text.substr(b, text.find_last_not_of(kSpace) - b + 1);
  *negative = text.front() == '-';
  if (text.front() == '+' || text.front() == '-') text.remove_prefix(1);
  return text;
}

}  // namespace

std::optional<int64_t> parse_int_saturating(std::string_view text) {
  bool negative = false;
  std::string_view digits = strip_sign(text, &negative);
  if (digits.empty()) return std::nullopt;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    int digit = c - '0';
    v = v > (kMax - digit) / 10 ? kMax : v * 10 + digit;
  }
  return negative ? -v : v;
}

int64_t clamp_delete_at(int64_t seconds) { return std::clamp<int64_t>(seconds, 0, kMaxDeleteAt); }

int64_t clamp_delete_at(double seconds) {
  if (!(seconds > 0)) return 0;  // NaN too
  return static_cast<int64_t>(std::min(seconds, static_cast<double>(kMaxDeleteAt)));
}

int64_t delete_at_of(const Metadata& md) {
  const std::string* v = find_meta(md, "X-Delete-At");
  if (!v) return 0;
  return parse_int_saturating(*v).value_or(0);
}

DeleteAtRequest check_delete_headers(const common::http::HeaderMap& headers,
                                     const common::Timestamp& now) {
  DeleteAtRequest out;
  const double now_seconds = now.seconds();
  if (auto v = headers.get("X-Delete-At")) out.value = std::string(*v);
  if (auto after_text = headers.get("X-Delete-After")) {
    std::optional<int64_t> after = parse_int_saturating(*after_text);
    if (!after) return {.refusal = "Non-integer X-Delete-After"};
    int64_t when = clamp_delete_at(now_seconds + static_cast<double>(*after));
    if (static_cast<double>(when) <= now_seconds) return {.refusal = "X-Delete-After in past"};
    out.value = common::normalize_delete_at(when);
  }
  if (!out.value) return out;
  std::optional<int64_t> at = parse_int_saturating(*out.value);
  if (!at) return {.refusal = "Non-integer X-Delete-At"};
  bool replication = common::config_true_value(headers.get_or("X-Backend-Replication", "f"));
  if (static_cast<double>(clamp_delete_at(*at)) <= now_seconds && !replication) {
    return {.refusal = "X-Delete-At in past"};
  }
  out.delete_at = *at;
  return out;
}

std::optional<int64_t> parse_queue_container(std::string_view text) {
  bool negative = false;
  std::string number(strip_sign(text, &negative));
  // strtod also reads hex and "nan(...)" and skips inner whitespace or a second sign, all of
  // which Python's float() refuses.
  if (number.empty() || number.find_first_of("xX(") != std::string::npos ||
      !(std::isdigit(static_cast<unsigned char>(number[0])) || number[0] == '.' ||
        std::isalpha(static_cast<unsigned char>(number[0])))) {
    return std::nullopt;
  }
  char* end = nullptr;
  double v = std::strtod(number.c_str(), &end);  // +-HUGE_VAL or 0 when out of range, as float()
  if (end != number.c_str() + number.size()) return std::nullopt;
  return clamp_delete_at(negative ? -v : v);
}

}  // namespace apus::object
