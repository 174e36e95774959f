#include "proxy/access_log.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <span>

#include "common/crypto/hmac.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"

namespace apus::proxy {

namespace {

using common::Status;

// The strftime letters Swift's StrFormatTime accepts as attributes.
constexpr std::string_view kTimeLetters = "aAbBcdHIjmMpSUwWxXyYZ";
Status refuse(std::string_view why) {
  return Status::invalid_argument("Cannot interpolate log_msg_template: " + std::string(why));
}

}  // namespace

common::Result<AccessLogTemplate> AccessLogTemplate::parse(std::string_view text,
                                                           std::string anonymization_method,
                                                           std::string anonymization_salt) {
  AccessLogTemplate t;
  for (char& c : anonymization_method) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!common::crypto::digest_hex(anonymization_method, "")) {
    return Status::invalid_argument("Unsupported hashing method: '" + anonymization_method +
                                    "'");
  }
  t.method_ = std::move(anonymization_method);
  t.salt_ = std::move(anonymization_salt);
  // Swift's "{MD5}<hex>", "{SSHA256}<hex>" with a salt.
  t.anonymized_prefix_ = t.salt_.empty() ? "{" : "{S";
  for (char c : t.method_) {
    t.anonymized_prefix_ += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  t.anonymized_prefix_ += '}';
  std::string literal;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      literal.push_back(c);
      i += 2;
      continue;
    }
    if (c == '}') return refuse("Single '}' encountered in format string");
    if (c != '{') {
      literal.push_back(c);
      ++i;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string_view::npos) return refuse("expected '}' before end of string");
    std::string_view ref = text.substr(i + 1, close - i - 1);
    if (ref.find_first_of(":![{") != std::string_view::npos) {
      return refuse("format specs and conversions are not supported: {" + std::string(ref) +
                    "}");
    }
    const size_t dot = ref.find('.');
    const std::string_view field = ref.substr(0, dot);
    const std::string_view attribute =
        dot == std::string_view::npos ? std::string_view() : ref.substr(dot + 1);
    if (field.empty()) return refuse("a field needs a name");
    std::optional<Part> part = resolve(field, attribute);
    if (!part) return refuse("unknown field {" + std::string(ref) + "}");
    if (!literal.empty()) t.parts_.push_back(Part{.literal = std::move(literal)});
    literal.clear();
    t.parts_.push_back(std::move(*part));
    i = close + 1;
  }
  if (!literal.empty()) t.parts_.push_back(Part{.literal = std::move(literal)});
  return t;
}

std::optional<AccessLogTemplate::Part> AccessLogTemplate::resolve(std::string_view field,
                                                                  std::string_view attribute) {
  static const std::pair<std::string_view, double AccessLogFields::*> kTimes[] = {
      {"start_time", &AccessLogFields::start_time}, {"end_time", &AccessLogFields::end_time}};
  // The first 11 may be anonymized.
  static const std::pair<std::string_view, std::string AccessLogFields::*> kTexts[] = {
      {"client_ip", &AccessLogFields::client_ip},
      {"remote_addr", &AccessLogFields::remote_addr},
      {"domain", &AccessLogFields::domain},
      {"path", &AccessLogFields::path},
      {"referer", &AccessLogFields::referer},
      {"user_agent", &AccessLogFields::user_agent},
      {"headers", &AccessLogFields::headers},
      {"client_etag", &AccessLogFields::client_etag},
      {"account", &AccessLogFields::account},
      {"container", &AccessLogFields::container},
      {"object", &AccessLogFields::object},
      {"method", &AccessLogFields::method},
      {"protocol", &AccessLogFields::protocol},
      {"auth_token", &AccessLogFields::auth_token},
      {"transaction_id", &AccessLogFields::transaction_id},
      {"source", &AccessLogFields::source},
      {"log_info", &AccessLogFields::log_info},
      {"policy_index", &AccessLogFields::policy_index}};
  constexpr size_t kAnonymizable = 11;
  static const std::pair<std::string_view, Kind> kOthers[] = {
      {"status_int", Kind::kStatus},
      {"wire_status_int", Kind::kWireStatus},
      {"bytes_recvd", Kind::kBytesRecvd},
      {"bytes_sent", Kind::kBytesSent},
      {"pid", Kind::kPid},
      {"ttfb", Kind::kTtfb},
      {"request_time", Kind::kRequestTime}};

  Part part;
  for (const auto& [name, member] : kTimes) {
    if (name != field) continue;
    part.kind = Kind::kTime;
    part.time = member;
    static const std::pair<std::string_view, TimeText> kParts[] = {
        {"", TimeText::kFull}, {"s", TimeText::kSeconds}, {"ms", TimeText::kMs},
        {"us", TimeText::kUs}, {"ns", TimeText::kNs},     {"Z", TimeText::kZone}};
    for (const auto& [text, which] : kParts) {
      if (text == attribute) {
        part.time_text = which;
        return part;
      }
    }
    part.time_text = TimeText::kStrftime;
    if (attribute == "datetime") {
      part.literal = "%d/%b/%Y/%H/%M/%S";
    } else if (attribute == "iso8601") {
      part.literal = "%Y-%m-%dT%H:%M:%S";
    } else if (attribute == "asctime") {
      part.literal = "%a %b %e %H:%M:%S %Y";
    } else if (attribute.size() == 1 && kTimeLetters.find(attribute[0]) != std::string_view::npos) {
      part.literal = "%" + std::string(attribute);
    } else {
      return std::nullopt;
    }
    return part;
  }
  for (size_t i = 0; i < std::size(kTexts); ++i) {
    if (kTexts[i].first != field) continue;
    part.kind = Kind::kText;
    part.text = kTexts[i].second;
    part.anonymized = attribute == "anonymized" && i < kAnonymizable;
    if (!attribute.empty() && !part.anonymized) return std::nullopt;
    return part;
  }
  for (const auto& [name, kind] : kOthers) {
    if (name != field) continue;
    if (!attribute.empty()) return std::nullopt;
    part.kind = kind;
    return part;
  }
  return std::nullopt;
}

namespace {

template <typename Number>
std::string_view number(std::span<char> buf, Number n) {
  if (n == 0) return {};  // Swift prints 0 as "-"
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), n);
  return std::string_view(buf.data(), end - buf.data());
}

// A time through a strftime format. The same second and format as the last line's on this
// thread (the usual case: {end_time.datetime} on every line) reuse its text.
std::string_view strftime_text(double t, const std::string& format) {
  thread_local std::time_t last_time = -1;
  thread_local std::string last_format;
  thread_local char text[64];
  thread_local size_t size = 0;
  const auto whole = static_cast<std::time_t>(t);
  if (whole != last_time || format != last_format) {
    std::tm tm{};
    ::gmtime_r(&whole, &tm);
    size = std::strftime(text, sizeof text, format.c_str(), &tm);
    last_time = whole;
    last_format = format;
  }
  return {text, size};
}

}  // namespace

void AccessLogTemplate::append_value(std::string& line, const Part& p,
                                     const AccessLogFields& f) const {
  char buf[400];  // the longest double in fixed notation, 308 digits and more, fits
  std::string owned;
  std::string_view v;
  switch (p.kind) {
    case Kind::kLiteral:
      line += p.literal;
      return;
    case Kind::kText: {
      const std::string& text = f.*p.text;
      if (!p.anonymized || text.empty()) {
        v = text;
        break;
      }
      owned = anonymized_prefix_ + *common::crypto::digest_hex(method_, salt_ + text);
      v = owned;
      break;
    }
    case Kind::kTime: {
      const double t = f.*p.time;
      if (p.time_text == TimeText::kZone) {
        v = "UTC";  // Python's datetime with tzinfo=UTC names it so
      } else if (p.time_text == TimeText::kStrftime) {
        v = strftime_text(t, p.literal);
      } else {
        const std::string_view seconds = common::log::format_fixed(buf, t, 9);
        const size_t dot = seconds.find('.');
        switch (p.time_text) {
          case TimeText::kSeconds:
            v = seconds.substr(0, dot);
            break;
          case TimeText::kMs:
            v = seconds.substr(dot + 1, 3);
            break;
          case TimeText::kUs:
            v = seconds.substr(dot + 1, 6);
            break;
          case TimeText::kNs:
            v = seconds.substr(dot + 1);
            break;
          default:
            v = seconds;
        }
      }
      break;
    }
    case Kind::kStatus:
      v = number(buf, f.status_int);
      break;
    case Kind::kWireStatus:
      v = number(buf, f.wire_status_int ? f.wire_status_int : f.status_int);
      break;
    case Kind::kBytesRecvd:
      v = number(buf, f.bytes_recvd);
      break;
    case Kind::kBytesSent:
      v = number(buf, f.bytes_sent);
      break;
    case Kind::kPid:
      v = number(buf, f.pid);
      break;
    case Kind::kTtfb:
      if (f.ttfb > 0) owned = common::pickle::python_float_repr(f.ttfb);
      v = owned;
      break;
    case Kind::kRequestTime:
      v = common::log::format_fixed(buf, f.end_time - f.start_time, 4);
      break;
  }
  if (v.empty()) {
    line += '-';
  } else {
    common::http::quote_append(line, v, "/:{}");
  }
}

std::string AccessLogTemplate::format(const AccessLogFields& f) const {
  std::string line;
  line.reserve(320);
  for (const Part& p : parts_) append_value(line, p, f);
  return line;
}

std::string obscure_sensitive(std::string_view value, size_t prefix) {
  if (value.size() <= prefix) return std::string(value);
  return std::string(value.substr(0, prefix)) + "...";
}

std::string obscure_target(std::string_view target, size_t prefix) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view query = target.substr(q + 1);
  bool first = true;
  while (true) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    const std::string key = common::http::percent_decode(pair.substr(0, eq));
    if (!first) out += '&';
    first = false;
    if (eq != std::string_view::npos &&
        (key == "temp_url_sig" || key == "Signature" || key == "X-Amz-Signature")) {
      out.append(pair.substr(0, eq + 1)).append(obscure_sensitive(pair.substr(eq + 1), prefix));
    } else {
      out.append(pair);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

std::string logged_headers(const common::http::HeaderMap& headers,
                           const std::vector<std::string>& only, size_t prefix) {
  std::string out;
  for (const auto& [raw_name, value] : headers) {
    const std::string name = common::http::title_case(raw_name);
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    if (!out.empty()) out += '\n';
    out.append(name).append(": ");
    const bool sensitive =
        name == "X-Auth-Token" || name == "X-Storage-Token" || name == "Authorization";
    out += sensitive ? obscure_sensitive(value, prefix) : value;
  }
  return out;
}

}  // namespace apus::proxy
