#include "object-server/delete_at.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>

#include "common/config/config.h"
#include "common/http/swob.h"

namespace apus::object {

namespace {

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

int64_t delete_at_of(const Metadata& md) {
  const std::string* v = find_meta(md, "X-Delete-At");
  if (!v) return 0;
  return common::parse_python_int_saturating(*v).value_or(0);
}

common::http::OrRefusal<DeleteAtRequest> check_delete_headers(
    const common::http::HeaderMap& headers, const common::Timestamp& now) {
  auto refuse = [](std::string why) { return common::http::text_response(400, std::move(why)); };
  DeleteAtRequest out;
  const double now_seconds = now.seconds();
  if (auto v = headers.get("X-Delete-At")) out.value = std::string(*v);
  if (auto after_text = headers.get("X-Delete-After")) {
    std::optional<int64_t> after = common::parse_python_int_saturating(*after_text);
    if (!after) return refuse("Non-integer X-Delete-After");
    int64_t when = common::clamp_delete_at(now_seconds + static_cast<double>(*after));
    if (static_cast<double>(when) <= now_seconds) return refuse("X-Delete-After in past");
    out.value = common::normalize_delete_at(when);
  }
  if (!out.value) return out;
  std::optional<int64_t> at = common::parse_python_int_saturating(*out.value);
  if (!at) return refuse("Non-integer X-Delete-At");
  bool replication = common::config_true_value(headers.get_or("X-Backend-Replication", "f"));
  if (static_cast<double>(common::clamp_delete_at(*at)) <= now_seconds && !replication) {
    return refuse("X-Delete-At in past");
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
  return common::clamp_delete_at(negative ? -v : v);
}

}  // namespace apus::object
