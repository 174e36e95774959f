// tempurl (tempurl.h). The signature is checked before anything reaches the app; a valid one
// replaces the request's authorize callback by one limited to the key's scope, and the answer
// goes out through a wrapper that removes headers and adds Content-Disposition and Expires as
// it passes (nothing is buffered).
#include "proxy/tempurl.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <cstring>

#include "common/http/date.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::iequals;
using common::http::Request;
using common::http::Response;

namespace tempurl {

namespace {

// Appends the UTF-8 encoding of code point `cp`.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// bytes.decode("utf-8", "replace") re-encoded: each maximal ill-formed subsequence becomes one
// U+FFFD, as CPython's decoder does.
std::string utf8_replace(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      out.append("\xef\xbf\xbd");
      ++i;
      continue;
    }
    size_t j = 1;
    for (; j <= need && i + j < in.size(); ++j) {
      const auto d = static_cast<unsigned char>(in[i + j]);
      if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xbf)) break;
    }
    if (j == need + 1) {
      out.append(in.substr(i, need + 1));
    } else {
      out.append("\xef\xbf\xbd");
    }
    i += j;
  }
  return out;
}

// urllib.parse.unquote(s) of a WSGI str (the raw bytes read as Latin-1), as UTF-8.
std::string python_unquote(std::string_view raw) {
  std::string out;
  size_t i = 0;
  while (i < raw.size()) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x80) {  // a Latin-1 character, kept as it is
      append_utf8(out, c);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < raw.size() && static_cast<unsigned char>(raw[j]) < 0x80) ++j;
    std::string_view run = raw.substr(i, j - i);
    if (raw.find('%') == std::string_view::npos) {
      out.append(run);
    } else {
      out.append(utf8_replace(common::http::percent_decode(run)));
    }
    i = j;
  }
  return out;
}

constexpr std::string_view kPythonSpace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";

std::string_view python_strip(std::string_view s) {
  size_t b = s.find_first_not_of(kPythonSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kPythonSpace) - b + 1);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// One alternative of a strptime field: up to two character classes.
struct Alt {
  char lo1, hi1, lo2, hi2;  // lo2 == 0: one character
};

bool match_alt(std::string_view s, size_t pos, const Alt& a, size_t* len) {
  if (pos >= s.size() || s[pos] < a.lo1 || s[pos] > a.hi1) return false;
  if (a.lo2 == 0) {
    *len = 1;
    return true;
  }
  if (pos + 1 >= s.size() || s[pos + 1] < a.lo2 || s[pos + 1] > a.hi2) return false;
  *len = 2;
  return true;
}

// The regular expression _strptime builds for "%Y-%m-%dT%H:%M:%SZ" (IGNORECASE), matched with
// backtracking over the alternatives of each field. fields[] gets Y, m, d, H, M, S.
struct Field {
  std::vector<Alt> alts;
  char sep;  // the literal after the field ('\0' for the end)
};

bool match_fields(std::string_view s, size_t pos, size_t f, const std::vector<Field>& spec,
                  int* values) {
  if (f == spec.size()) return pos == s.size();
  for (const Alt& a : spec[f].alts) {
    size_t len = 0;
    if (!match_alt(s, pos, a, &len)) continue;
    size_t next = pos + len;
    char sep = spec[f].sep;
    if (sep != '\0') {
      if (next >= s.size() || std::toupper(static_cast<unsigned char>(s[next])) != sep) continue;
      ++next;
    }
    if (!match_fields(s, next, f + 1, spec, values)) continue;
    int v = 0;
    for (size_t k = pos; k < pos + len; ++k) {
      if (is_digit(s[k])) v = v * 10 + (s[k] - '0');
    }
    values[f] = v;
    return true;
  }
  return false;
}

bool leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Python's IPv4Address text: four decimal octets, no leading zeros.
std::optional<uint32_t> parse_ipv4(std::string_view s) {
  uint32_t out = 0;
  int parts = 0;
  size_t i = 0;
  while (true) {
    size_t j = i;
    while (j < s.size() && is_digit(s[j])) ++j;
    size_t n = j - i;
    if (n == 0 || n > 3 || (n > 1 && s[i] == '0')) return std::nullopt;
    int v = 0;
    for (size_t k = i; k < j; ++k) v = v * 10 + (s[k] - '0');
    if (v > 255) return std::nullopt;
    out = (out << 8) | static_cast<uint32_t>(v);
    ++parts;
    if (j == s.size()) break;
    if (s[j] != '.' || parts == 4) return std::nullopt;
    i = j + 1;
  }
  if (parts != 4) return std::nullopt;
  return out;
}

std::optional<std::array<uint8_t, 16>> parse_ipv6(std::string_view s) {
  // Python allows a scope id after '%'; it takes no part in the comparison.
  if (size_t pct = s.find('%'); pct != std::string_view::npos) {
    if (pct + 1 == s.size() || s.find('/', pct) != std::string_view::npos) return std::nullopt;
    s = s.substr(0, pct);
  }
  if (s.empty() || s.size() > 45) return std::nullopt;
  char buf[46];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  std::array<uint8_t, 16> out{};
  if (inet_pton(AF_INET6, buf, out.data()) != 1) return std::nullopt;
  return out;
}

// Prefix length from Python's prefix string: ASCII digits, 0..max (leading zeros allowed).
std::optional<int> parse_prefixlen(std::string_view s, int max) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

// A contiguous netmask's prefix length, or nullopt.
std::optional<int> prefix_of_mask(uint32_t mask) {
  int ones = 0;
  while (ones < 32 && (mask & (0x80000000u >> ones))) ++ones;
  uint32_t want = ones == 0 ? 0 : ~uint32_t{0} << (32 - ones);
  if (mask != want) return std::nullopt;
  return ones;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> python_parse_qs(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view field = query.substr(start, amp - start);
    start = amp + 1;
    if (field.empty()) continue;
    size_t eq = field.find('=');
    std::string name(field.substr(0, eq));
    std::string value(eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1));
    std::replace(name.begin(), name.end(), '+', ' ');
    std::replace(value.begin(), value.end(), '+', ' ');
    out.emplace_back(python_unquote(name), python_unquote(value));
  }
  return out;
}

QueryInfo parse_query_info(std::string_view query) {
  QueryInfo q;
  for (auto& [name, value] : python_parse_qs(query)) {
    std::optional<std::string>* slot = nullptr;
    if (name == "temp_url_sig") slot = &q.sig;
    else if (name == "temp_url_expires") slot = &q.expires;
    else if (name == "temp_url_prefix") slot = &q.prefix;
    else if (name == "filename") slot = &q.filename;
    else if (name == "temp_url_ip_range") slot = &q.ip_range;
    else if (name == "inline") q.inline_disposition = true;
    if (slot != nullptr && !slot->has_value()) *slot = std::move(value);  // the first one
  }
  return q;
}

std::optional<PythonInt> python_int(std::string_view s) {
  // Python 3.11 refuses strings of more than 4300 digits (sys.int_info.default_max_str_digits).
  constexpr size_t kMaxDigits = 4300;
  s = python_strip(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  std::string digits;
  bool after_underscore = false;
  for (char c : s) {
    if (c == '_') {
      if (after_underscore) return std::nullopt;
      after_underscore = true;
      continue;
    }
    if (!is_digit(c)) return std::nullopt;
    after_underscore = false;
    digits.push_back(c);
  }
  if (digits.size() > kMaxDigits) return std::nullopt;
  size_t nz = digits.find_first_not_of('0');
  PythonInt out;
  if (nz == std::string::npos) {
    out.text = "0";
    return out;
  }
  digits.erase(0, nz);
  out.text = negative ? "-" + digits : digits;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t v = 0;
  for (char c : digits) {
    const int d = c - '0';
    v = v > (kMax - d) / 10 ? kMax : v * 10 + d;
  }
  out.value = negative ? -v : v;
  return out;
}

std::optional<int64_t> parse_iso8601(std::string_view value) {
  // %Y is exactly four digits.
  if (value.size() < 5) return std::nullopt;
  for (size_t k = 0; k < 4; ++k) {
    if (!is_digit(value[k])) return std::nullopt;
  }
  if (value[4] != '-') return std::nullopt;
  const int64_t year = (value[0] - '0') * 1000 + (value[1] - '0') * 100 + (value[2] - '0') * 10 +
                       (value[3] - '0');
  static const std::vector<Field> kRest = {
      {{{'1', '1', '0', '2'}, {'0', '0', '1', '9'}, {'1', '9', 0, 0}}, '-'},   // %m
      {{{'3', '3', '0', '1'}, {'1', '2', '0', '9'}, {'0', '0', '1', '9'}, {'1', '9', 0, 0},
        {' ', ' ', '1', '9'}},
       'T'},                                                                  // %d
      {{{'2', '2', '0', '3'}, {'0', '1', '0', '9'}, {'0', '9', 0, 0}}, ':'},  // %H
      {{{'0', '5', '0', '9'}, {'0', '9', 0, 0}}, ':'},                        // %M
      {{{'6', '6', '0', '1'}, {'0', '5', '0', '9'}, {'0', '9', 0, 0}}, 'Z'},  // %S
  };
  int v[5] = {};
  if (!match_fields(value, 5, 0, kRest, v)) return std::nullopt;
  const int month = v[0], day = v[1];
  // datetime.date() refuses year 0 and days the month does not have.
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1) return std::nullopt;
  int days = kDays[month - 1] + (month == 2 && leap(year) ? 1 : 0);
  if (day > days) return std::nullopt;
  return common::http::epoch_from_civil(year, month, day, v[2], v[3], v[4]);
}

std::optional<PythonInt> normalize_expires(const std::optional<std::string>& value, double now) {
  if (!value) return std::nullopt;
  std::optional<PythonInt> out = python_int(*value);
  if (!out) {
    if (auto epoch = parse_iso8601(*value)) {
      out = PythonInt{std::to_string(*epoch), *epoch};
    } else {
      out = PythonInt{"0", 0};
    }
  }
  if (static_cast<long double>(out->value) < static_cast<long double>(now)) out = PythonInt{"0", 0};
  return out;
}

bool ip_in_range(std::string_view range, std::string_view client) {
  size_t slash = range.find('/');
  if (slash != std::string_view::npos && range.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  std::string_view addr = range.substr(0, slash);
  std::optional<std::string_view> mask;
  if (slash != std::string_view::npos) mask = range.substr(slash + 1);
  if (auto net4 = parse_ipv4(addr)) {
    int prefix = 32;
    if (mask) {
      if (auto p = parse_prefixlen(*mask, 32)) {
        prefix = *p;
      } else if (auto m = parse_ipv4(*mask)) {
        if (auto as_net = prefix_of_mask(*m)) {
          prefix = *as_net;
        } else if (auto as_host = prefix_of_mask(~*m)) {
          prefix = *as_host;
        } else {
          return false;
        }
      } else {
        return false;
      }
    }
    const uint32_t bits = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
    if ((*net4 & ~bits) != 0) return false;  // host bits set: ValueError
    auto c = parse_ipv4(client);
    return c && (*c & bits) == *net4;
  }
  auto net6 = parse_ipv6(addr);
  if (!net6) return false;
  int prefix = 128;
  if (mask) {
    auto p = parse_prefixlen(*mask, 128);
    if (!p) return false;
    prefix = *p;
  }
  for (int bit = prefix; bit < 128; ++bit) {
    if ((*net6)[bit / 8] & (0x80 >> (bit % 8))) return false;  // host bits set
  }
  if (parse_ipv4(client)) return false;  // another version: not in it
  auto c = parse_ipv6(client);
  if (!c) return false;
  for (int bit = 0; bit < prefix; ++bit) {
    if (((*c)[bit / 8] ^ (*net6)[bit / 8]) & (0x80 >> (bit % 8))) return false;
  }
  return true;
}

std::string python_title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool upper = u >= 'A' && u <= 'Z', lower = u >= 'a' && u <= 'z';
    if (upper || lower) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string environ_key(std::string_view header_name) {
  std::string key = "HTTP_";
  for (char c : header_name) {
    key.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  if (key == "HTTP_CONTENT_LENGTH") return "CONTENT_LENGTH";
  if (key == "HTTP_CONTENT_TYPE") return "CONTENT_TYPE";
  return key;
}

HeaderRules::HeaderRules(const std::vector<std::string>& remove,
                         const std::vector<std::string>& allow, bool incoming)
    : incoming_(incoming) {
  for (const std::string& h : remove) {
    std::string k = key(h);
    if (!k.empty() && k.back() == '*') {
      k.pop_back();
      remove_prefixes_.push_back(std::move(k));
    } else {
      remove_.push_back(std::move(k));
    }
  }
  for (const std::string& h : allow) {
    std::string k = key(h);
    if (!k.empty() && k.back() == '*') {
      k.pop_back();
      allow_prefixes_.push_back(std::move(k));
    } else {
      allow_.push_back(std::move(k));
    }
  }
}

std::string HeaderRules::key(std::string_view name) const {
  return incoming_ ? environ_key(name) : python_title(name);
}

bool HeaderRules::removes(std::string_view name) const {
  const std::string k = key(name);
  auto has = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  auto starts = [&](const std::vector<std::string>& v) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& p) { return k.starts_with(p); });
  };
  if (has(allow_) || starts(allow_prefixes_)) return false;
  return has(remove_) || starts(remove_prefixes_);
}

std::string disposition_format(std::string_view type, std::string_view filename) {
  return std::string(type) + "; filename=\"" + common::http::quote(filename, " /") +
         "\"; filename*=UTF-8''" + common::http::quote(filename);
}

std::vector<std::string> keys_from_headers(const HeaderMap& headers,
                                           std::string_view meta_prefix) {
  std::vector<std::string> keys;
  const std::string key1 = std::string(meta_prefix) + "Temp-Url-Key";
  const std::string key2 = key1 + "-2";
  for (const auto& [name, value] : headers) {
    if (iequals(name, key1) || iequals(name, key2)) keys.push_back(value);
  }
  return keys;
}

Result<Options> parse_options(const common::Section& section) {
  Options o;
  o.methods = section.get_words("methods", kDefaultMethods);
  o.incoming_remove = section.get_words("incoming_remove_headers", kDefaultIncomingRemove);
  o.incoming_allow = section.get_words("incoming_allow_headers", kDefaultIncomingAllow);
  o.outgoing_remove = section.get_words("outgoing_remove_headers", kDefaultOutgoingRemove);
  o.outgoing_allow = section.get_words("outgoing_allow_headers", kDefaultOutgoingAllow);
  std::vector<std::string> ignored;
  auto digests = digest::allowed_digests(section.get_string("allowed_digests", ""), &ignored);
  if (!digests.ok()) return section.invalid("allowed_digests", digests.status().message());
  o.digests = std::move(*digests);
  if (auto p = section.get("path_prefix")) o.path_prefix = *p;
  return o;
}

std::string info_json(const Options& o) {
  std::string out = "{";
  auto list = [&out](std::string_view name, const std::vector<std::string>& items) {
    if (out.size() > 1) out += ", ";
    common::listing::append_json_string(out, name);
    out += ": [";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ", ";
      common::listing::append_json_string(out, items[i]);
    }
    out += "]";
  };
  list("methods", o.methods);
  list("incoming_remove_headers", o.incoming_remove);
  list("incoming_allow_headers", o.incoming_allow);
  list("outgoing_remove_headers", o.outgoing_remove);
  list("outgoing_allow_headers", o.outgoing_allow);
  list("allowed_digests", o.digests.allowed);
  if (!o.digests.deprecated.empty()) list("deprecated_digests", o.digests.deprecated);
  return out + "}";
}

}  // namespace tempurl

namespace {

using tempurl::HeaderRules;

// Swift's answer to a temp URL that does not hold (no body for HEAD). swob builds its challenge
// before it knows the request, so the realm is "unknown".
Response invalid(const Request& req) {
  Response r = common::http::swob_response_with_body(401, std::string(tempurl::kInvalidBody));
  r.headers.set("Www-Authenticate", "Swift realm=\"unknown\"");
  if (req.method == "HEAD") r.body.clear();
  return r;
}

// The largest epoch second Python's time.gmtime() can break down (the year must fit a C int).
constexpr int64_t kMaxGmtime = 67768036191676799;

net::awaitable<std::optional<Response>> ready(std::optional<Response> r) { co_return r; }

// The authorize callback a valid temp URL installs: the request (and any subrequest made for
// it) must stay in the key's account, and for a container key in its container.
Authorize scoped_authorize(std::string account, std::optional<std::string> container) {
  return [account = std::move(account), container = std::move(container)](
             const Request& r, ProxyEnv&) -> net::awaitable<std::optional<Response>> {
    auto segs = common::http::split_path(common::http::percent_decode(r.path()),
                                         container ? 3 : 2, container ? 4 : 3, true);
    bool ok = segs.ok() && (*segs)[1] == account && (!container || (*segs)[2] == *container);
    if (ok) return ready(std::nullopt);
    Response denied = common::http::swob_response(401);
    if (r.method == "HEAD") denied.body.clear();
    return ready(std::move(denied));
  };
}

// The client's exchange as the app sees it after a valid temp URL: the cleaned request, and an
// answer whose headers are edited on the way out. An answer that turns out not to be allowed
// (a container's root that staticweb did not serve) is replaced by the 401.
class TempUrlAnswer final : public ExchangeWrapper {
 public:
  struct Plan {
    const HeaderRules* outgoing = nullptr;
    bool get_or_head = false;
    bool no_object = false;  // the request named a container's root
    bool inline_disposition = false;
    std::optional<std::string> filename;
    std::string default_name;  // the object's base name
    int64_t expires = 0;
  };
  TempUrlAnswer(Exchange& inner, Plan plan) : ExchangeWrapper(inner), plan_(std::move(plan)) {}

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (replaced_) co_return Status::cancelled("answer replaced by tempurl");
    co_return co_await ExchangeWrapper::write_body(chunk);
  }
  net::awaitable<Status> finish_response() override {
    if (replaced_) co_return Status();
    co_return co_await ExchangeWrapper::finish_response();
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    if (auto replacement = edit(r.status, r.headers)) {
      replaced_ = true;
      co_return co_await ExchangeWrapper::do_respond(std::move(*replacement));
    }
    co_return co_await ExchangeWrapper::do_respond(std::move(r));
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    if (auto replacement = edit(status, headers)) {
      replaced_ = true;
      co_return co_await ExchangeWrapper::do_respond(std::move(*replacement));
    }
    co_return co_await ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  // Edits `headers` in place; a response to send instead when the answer may not go out.
  std::optional<Response> edit(int status, HeaderMap& headers) {
    // HeaderKeyDict: title-cased names, one field per name (the last value, where the first
    // stood), then the configured removals.
    std::vector<std::pair<std::string, std::string>> fields;
    for (const auto& [name, value] : headers) {
      std::string title = tempurl::python_title(name);
      auto it = std::find_if(fields.begin(), fields.end(),
                             [&](const auto& f) { return f.first == title; });
      if (it != fields.end()) {
        it->second = value;
      } else {
        fields.emplace_back(std::move(title), value);
      }
    }
    HeaderMap out;
    std::optional<std::string> existing_disposition, generator;
    const bool success = status >= 200 && status < 300;
    for (auto& [name, value] : fields) {
      if (plan_.outgoing->removes(name)) continue;
      if (plan_.get_or_head && success) {
        if (iequals(name, "X-Backend-Content-Generator")) generator = value;
        if (iequals(name, "Content-Disposition")) {
          existing_disposition = value;
          continue;
        }
      }
      out.add(name, value);
    }
    if (plan_.get_or_head && success) {
      bool inline_disposition = plan_.inline_disposition;
      if (generator == "staticweb") {
        inline_disposition = true;
      } else if (plan_.no_object) {
        return invalid(request());
      }
      std::string value;
      if (inline_disposition) {
        value = plan_.filename && !plan_.filename->empty()
                    ? tempurl::disposition_format("inline", *plan_.filename)
                    : "inline";
      } else if (plan_.filename && !plan_.filename->empty()) {
        value = tempurl::disposition_format("attachment", *plan_.filename);
      } else if (existing_disposition) {
        value = *existing_disposition;
      } else {
        value = tempurl::disposition_format("attachment", plan_.default_name);
      }
      for (size_t at = value.find('\n'); at != std::string::npos; at = value.find('\n', at)) {
        value.replace(at, 1, "%0A");
      }
      out.add("Content-Disposition", value);
      if (plan_.expires > kMaxGmtime) {
        // Python's gmtime() fails there: the proxy's catch_errors answers.
        Response r = common::http::swob_response(500);
        r.body = "An error occurred";
        return r;
      }
      out.add("Expires", common::http::format_http_date(plan_.expires));
    }
    headers = std::move(out);
    return std::nullopt;
  }

  Plan plan_;
  bool replaced_ = false;
};

class TempUrl final : public Middleware {
 public:
  TempUrl(tempurl::Options options, InfoLookup& info)
      : o_(std::move(options)),
        incoming_(o_.incoming_remove, o_.incoming_allow, true),
        outgoing_(o_.outgoing_remove, o_.outgoing_allow, false),
        info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("tempurl"), tempurl::info_json(o_));
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (req.method == "OPTIONS") co_return co_await next(ex, env);
    tempurl::QueryInfo q = tempurl::parse_query_info(req.query());
    const double now = std::chrono::duration<double>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    std::optional<tempurl::PythonInt> expires = tempurl::normalize_expires(q.expires, now);
    if (!q.sig && !expires) co_return co_await next(ex, env);
    if (!q.sig || q.sig->empty() || !expires || expires->text == "0") {
      co_return co_await refuse(ex, "no signature or expired");
    }
    std::optional<digest::Signature> sig = digest::extract_digest_and_algorithm(*q.sig);
    if (!sig || !o_.digests.contains(sig->algorithm)) {
      co_return co_await refuse(ex, "signature not readable or digest not allowed");
    }
    const bool allow_root =
        (req.method == "GET" || req.method == "HEAD") && q.prefix && q.prefix->empty();
    const std::string path_info = common::http::percent_decode(req.path());
    auto parts = path_parts(req.method, path_info, allow_root);
    if (!parts) co_return co_await refuse(ex, "not an object request of an allowed method");
    const auto& [account, container, object] = *parts;
    if (q.ip_range && !q.ip_range->empty() && !tempurl::ip_in_range(*q.ip_range, req.remote_addr)) {
      co_return co_await refuse(ex, "client address outside temp_url_ip_range");
    }
    // (key, is the account's)
    std::vector<std::pair<std::string, bool>> keys =
        co_await get_keys(req, env, account, container);
    if (keys.empty()) co_return co_await refuse(ex, "no Temp-URL keys");
    std::string hmac_path;
    if (!q.prefix) {
      hmac_path = "/v1/" + account + "/" + container + "/" + object;
    } else {
      if (!object.starts_with(*q.prefix)) co_return co_await refuse(ex, "prefix does not match");
      hmac_path = "prefix:/v1/" + account + "/" + container + "/" + *q.prefix;
    }
    if (o_.path_prefix) {
      std::string_view pp = *o_.path_prefix;
      while (!pp.empty() && pp.front() == '/') pp.remove_prefix(1);
      while (!pp.empty() && pp.back() == '/') pp.remove_suffix(1);
      hmac_path = "/" + std::string(pp) + hmac_path;
    }
    static constexpr std::string_view kHeadMethods[] = {"HEAD", "GET", "POST", "PUT"};
    std::vector<std::string_view> methods;
    if (req.method == "HEAD") {
      methods.assign(std::begin(kHeadMethods), std::end(kHeadMethods));
    } else {
      methods.push_back(req.method);
    }
    std::optional<bool> account_scope;
    const std::string ip_range = q.ip_range.value_or("");
    for (std::string_view m : methods) {
      for (const auto& [key, is_account] : keys) {
        std::string mac = digest::temp_url_hmac(sig->algorithm, m, expires->text, hmac_path, key,
                                                ip_range);
        // Stops only at a match, so the time taken says nothing about a wrong signature.
        if (digest::streq_const_time(sig->hex, mac)) {
          account_scope = is_account;
          break;
        }
      }
      if (account_scope) break;
    }
    if (!account_scope) co_return co_await refuse(ex, "signature does not match");
    APUS_LOG_DEBUG("tempurl: " + env.trans_id + " signature " + sig->algorithm + " ok");

    if (req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS") {
      for (const auto& [name, value] : req.headers) {
        for (std::string_view bad : tempurl::kDisallowedIncoming) {
          if (iequals(name, bad)) {
            co_return co_await ex.reply(common::http::swob_response_with_body(
                400, "The header '" + std::string(bad) + "' is not allowed in this tempurl"));
          }
        }
      }
    }

    TempUrlAnswer::Plan plan;
    plan.outgoing = &outgoing_;
    plan.get_or_head = req.method == "GET" || req.method == "HEAD";
    plan.no_object = object.empty();
    plan.inline_disposition = q.inline_disposition;
    plan.filename = q.filename;
    plan.expires = expires->value;
    {
      std::string_view p = path_info;
      while (!p.empty() && p.back() == '/') p.remove_suffix(1);
      plan.default_name = std::string(p.substr(p.rfind('/') + 1));
    }
    TempUrlAnswer out(ex, std::move(plan));
    Request& r = out.mutable_request();
    std::vector<std::string> drop;
    for (const auto& [name, value] : r.headers) {
      if (incoming_.removes(name)) drop.push_back(name);
    }
    for (const auto& name : drop) r.headers.erase(name);
    // What the rest of the pipeline sees of the query: the temp URL's own fields only.
    std::string qs = "temp_url_sig=" + quote_plus(sig->hex) +
                     "&temp_url_expires=" + quote_plus(*q.expires);
    if (q.prefix) qs += "&temp_url_prefix=" + quote_plus(*q.prefix);
    if (q.filename && !q.filename->empty()) qs += "&filename=" + quote_plus(*q.filename);
    if (q.inline_disposition) qs += "&inline=";
    r.target = std::string(req.path()) + "?" + qs;

    env.authorize = *account_scope ? scoped_authorize(account, std::nullopt)
                                   : scoped_authorize(account, container);
    env.authorize_override = true;
    env.remote_user = ".wsgi.tempurl";
    co_await next(out, env);
  }

 private:
  struct Parts {
    std::string account, container, object;
  };

  // Swift's _get_path_parts(): account, container and object of an object request (or of a
  // container's root when allowed) made with one of the configured methods.
  std::optional<Parts> path_parts(const std::string& method, const std::string& path_info,
                                  bool allow_root) const {
    if (std::find(o_.methods.begin(), o_.methods.end(), method) == o_.methods.end()) {
      return std::nullopt;
    }
    auto segs = common::http::split_path(path_info, allow_root ? 3 : 4, 4, true);
    if (!segs.ok() || (*segs)[0] != "v1") return std::nullopt;
    Parts p{*(*segs)[1], *(*segs)[2], (*segs)[3].value_or("")};
    if (!allow_root && p.object.find_first_not_of('/') == std::string::npos) return std::nullopt;
    return p;
  }

  // The account's keys (true) then the container's (false), as Swift's _get_keys().
  net::awaitable<std::vector<std::pair<std::string, bool>>> get_keys(
      const Request& req, const ProxyEnv& env, const std::string& account,
      const std::string& container) {
    ProxyEnv tu = subrequest_env(env, "TU");
    std::vector<std::pair<std::string, bool>> keys;
    CachedInfo a = co_await info_.account_info(account, req, tu);
    for (auto& k : tempurl::keys_from_headers(a.headers, "X-Account-Meta-")) {
      keys.emplace_back(std::move(k), true);
    }
    CachedInfo c = co_await info_.container_info(account, container, req, tu);
    for (auto& k : tempurl::keys_from_headers(c.headers, "X-Container-Meta-")) {
      keys.emplace_back(std::move(k), false);
    }
    co_return keys;
  }

  static std::string quote_plus(std::string_view s) {
    std::string q = common::http::quote(s, " ");
    std::replace(q.begin(), q.end(), ' ', '+');
    return q;
  }

  net::awaitable<void> refuse(Exchange& ex, std::string_view why) {
    APUS_LOG_DEBUG("tempurl: 401: " + std::string(why));
    co_return co_await ex.reply(invalid(ex.request()));
  }

  tempurl::Options o_;
  HeaderRules incoming_, outgoing_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_tempurl(const common::Section& section,
                                                 const MiddlewareContext& context) {
  auto options = tempurl::parse_options(section);
  if (!options.ok()) return options.status();
  std::vector<std::string> ignored;
  (void)digest::allowed_digests(section.get_string("allowed_digests", ""), &ignored);
  if (!ignored.empty()) {
    std::string names;
    for (const auto& n : ignored) names += (names.empty() ? "" : ", ") + n;
    APUS_LOG_WARNING("tempurl: the following digest algorithms are configured but not "
                     "supported: " + names);
  }
  return std::unique_ptr<Middleware>(std::make_unique<TempUrl>(std::move(*options), context.info));
}

}  // namespace apus::proxy
