#include "proxy/access_log.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <ctime>

#include "common/crypto/hmac.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/pickle.h"

namespace apus::proxy {

namespace {

using common::Status;

constexpr std::array<std::string_view, 2> kTimeFields = {"start_time", "end_time"};
constexpr std::array<std::string_view, 11> kAnonymizable = {
    "client_ip", "remote_addr", "domain",  "path",      "referer", "user_agent",
    "headers",   "client_etag", "account", "container", "object"};
constexpr std::array<std::string_view, 14> kPlain = {
    "method",         "protocol", "status_int", "auth_token",   "bytes_recvd",
    "bytes_sent",     "transaction_id", "request_time", "source", "log_info",
    "policy_index",   "ttfb",     "pid",        "wire_status_int"};
// The strftime letters Swift's StrFormatTime accepts as attributes.
constexpr std::string_view kTimeLetters = "aAbBcdHIjmMpSUwWxXyYZ";
constexpr std::array<std::string_view, 8> kTimeWords = {"s",  "ms",       "us",      "ns",
                                                        "datetime", "iso8601", "asctime", ""};

bool among(std::string_view name, auto const& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Status refuse(std::string_view why) {
  return Status::invalid_argument("Cannot interpolate log_msg_template: " + std::string(why));
}

std::string time_attribute(double t, std::string_view attribute) {
  const std::string seconds = common::log::format_fixed(t, 9);
  std::string_view text = seconds;
  const size_t dot = text.find('.');
  if (attribute.empty()) return std::string(text);
  if (attribute == "s") return std::string(text.substr(0, dot));
  if (attribute == "ms") return std::string(text.substr(dot + 1, 3));
  if (attribute == "us") return std::string(text.substr(dot + 1, 6));
  if (attribute == "ns") return std::string(text.substr(dot + 1));
  std::time_t whole = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&whole, &tm);
  char out[64];
  if (attribute == "Z") return "UTC";  // Python's datetime with tzinfo=UTC names it so
  const std::string format = attribute == "datetime"  ? "%d/%b/%Y/%H/%M/%S"
                             : attribute == "iso8601" ? "%Y-%m-%dT%H:%M:%S"
                             : attribute == "asctime" ? "%a %b %e %H:%M:%S %Y"
                                                      : "%" + std::string(attribute);
  return std::string(out, std::strftime(out, sizeof out, format.c_str(), &tm));
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
    Part part;
    const size_t dot = ref.find('.');
    part.field = std::string(ref.substr(0, dot));
    if (dot != std::string_view::npos) part.attribute = std::string(ref.substr(dot + 1));
    const std::string& a = part.attribute;
    bool known;
    if (among(part.field, kTimeFields)) {
      known = (a.size() == 1 && kTimeLetters.find(a[0]) != std::string_view::npos) ||
              among(a, kTimeWords);
    } else if (among(part.field, kAnonymizable)) {
      known = a.empty() || a == "anonymized";
    } else {
      known = among(part.field, kPlain) && a.empty();
    }
    if (part.field.empty()) return refuse("a field needs a name");
    if (!known) return refuse("unknown field {" + std::string(ref) + "}");
    if (!literal.empty()) t.parts_.push_back(Part{std::move(literal), {}, {}});
    literal.clear();
    t.parts_.push_back(std::move(part));
    i = close + 1;
  }
  if (!literal.empty()) t.parts_.push_back(Part{std::move(literal), {}, {}});
  return t;
}

std::string AccessLogTemplate::value(const Part& p, const AccessLogFields& f) const {
  auto number = [](auto n) { return n ? std::to_string(n) : std::string(); };
  if (p.field == "start_time") return time_attribute(f.start_time, p.attribute);
  if (p.field == "end_time") return time_attribute(f.end_time, p.attribute);
  const std::string* text = nullptr;
  static const std::pair<std::string_view, std::string AccessLogFields::*> kStrings[] = {
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
  for (const auto& [name, member] : kStrings) {
    if (name == p.field) text = &(f.*member);
  }
  if (text) {
    if (p.attribute != "anonymized" || text->empty()) return *text;
    std::string name = method_;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return (salt_.empty() ? "{" : "{S") + name + "}" +
           *common::crypto::digest_hex(method_, salt_ + *text);
  }
  if (p.field == "status_int") return number(f.status_int);
  if (p.field == "wire_status_int") return number(f.wire_status_int ? f.wire_status_int
                                                                      : f.status_int);
  if (p.field == "bytes_recvd") return number(f.bytes_recvd);
  if (p.field == "bytes_sent") return number(f.bytes_sent);
  if (p.field == "pid") return number(f.pid);
  if (p.field == "ttfb") return f.ttfb > 0 ? common::pickle::python_float_repr(f.ttfb) : std::string();
  if (p.field == "request_time") return common::log::format_fixed(f.end_time - f.start_time, 4);
  return {};
}

std::string AccessLogTemplate::format(const AccessLogFields& f) const {
  std::string line;
  line.reserve(320);
  for (const Part& p : parts_) {
    if (p.field.empty()) {
      line += p.literal;
      continue;
    }
    const std::string v = value(p, f);
    line += v.empty() ? std::string("-") : common::http::quote(v, "/:{}");
  }
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
