#include "proxy/s3api/s3_auth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "common/config/config.h"
#include "common/crypto/base64.h"
#include "common/crypto/hmac.h"
#include "common/http/date.h"
#include "common/http/url.h"

namespace apus::proxy::s3api {

namespace {

using common::http::HeaderMap;

constexpr std::string_view kV4Algorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view kValidDate =
    "AWS authentication requires a valid Date or x-amz-date header";
// Swift's Timestamp refuses anything past this; s3api blames clock skew for it.
constexpr int64_t kMaxTimestamp = 9999999999;
constexpr int64_t kOneWeek = 604800;

// The query parameters Version 2 signs (Swift's ALLOWED_SUB_RESOURCES), sorted.
constexpr std::string_view kSubResources[] = {
    "acl", "cors", "delete", "lifecycle", "location", "logging", "notification", "partNumber",
    "policy", "requestPayment", "response-cache-control", "response-content-disposition",
    "response-content-encoding", "response-content-language", "response-content-type",
    "response-expires", "restore", "tagging", "torrent", "uploadId", "uploads", "versionId",
    "versioning", "versions", "website"};

// Headers a Version 4 request must sign when it sends them.
constexpr std::string_view kMustBeSigned[] = {"x-amz-copy", "x-amz-acl", "x-amz-grant",
                                              "x-amz-meta"};

// swob's req.params: the query's fields, the last of a name winning.
using Params = std::map<std::string, std::string>;
Params params_of(std::string_view query) {
  Params out;
  for (auto& [k, v] : common::http::parse_query(query)) out[k] = std::move(v);
  return out;
}
const std::string* param(const Params& p, std::string_view name) {
  auto it = p.find(std::string(name));
  return it == p.end() ? nullptr : &it->second;
}

// Swift's _header_strip(): control characters and spaces off both ends; nullopt when nothing
// is left of a value that had something.
std::optional<std::string> header_strip(std::optional<std::string_view> value) {
  if (!value) return std::nullopt;
  std::string_view v = *value;
  while (!v.empty() && static_cast<unsigned char>(v.front()) <= 0x20) v.remove_prefix(1);
  while (!v.empty() && static_cast<unsigned char>(v.back()) <= 0x20) v.remove_suffix(1);
  if (!value->empty() && v.empty()) return std::nullopt;
  return std::string(v);
}

std::string trim(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  return std::string(v);
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (char c : s) {
    if (std::isupper(static_cast<unsigned char>(c))) return false;
    cased = cased || std::islower(static_cast<unsigned char>(c));
  }
  return cased;
}

std::string lower(std::string_view s) { return common::http::to_lower(s); }

// Swift's S3Timestamp.amz_date_format: "YYYYMMDDTHHMMSSZ".
std::string amz_date(int64_t t) {
  auto c = common::http::civil_from_epoch(t);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lld%02d%02dT%02d%02d%02dZ", static_cast<long long>(c.year),
                c.month, c.day, c.hour, c.minute, c.second);
  return buf;
}


// A fixed-width decimal field of `s` at [pos, pos + width), or -1.
int digits(std::string_view s, size_t pos, size_t width) {
  if (pos + width > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// The zone of an RFC 2822 date as email.utils.parsedate_tz reads it (seconds east of UTC):
// a +HHMM/-HHMM offset or one of the names it knows; 0 otherwise.
int64_t zone_offset(std::string_view value) {
  std::string_view v = value;
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  size_t sp = v.find_last_of(" \t");
  std::string_view zone = sp == std::string_view::npos ? v : v.substr(sp + 1);
  if (zone.size() == 5 && (zone[0] == '+' || zone[0] == '-')) {
    int hh = digits(zone, 1, 2), mm = digits(zone, 3, 2);
    if (hh >= 0 && mm >= 0) return (zone[0] == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
  }
  static const std::pair<std::string_view, int> kNames[] = {
      {"EST", -5}, {"EDT", -4}, {"CST", -6}, {"CDT", -5},
      {"MST", -7}, {"MDT", -6}, {"PST", -8}, {"PDT", -7}};
  for (const auto& [name, hours] : kNames) {
    if (common::http::iequals(zone, name)) return hours * 3600;
  }
  return 0;
}

}  // namespace

std::optional<int64_t> parse_s3_time(std::string_view value, bool compact_iso) {
  if (auto t = common::http::parse_http_date(value)) return *t - zone_offset(value);
  // time.strptime with "%Y%m%dT%H%M%SZ" or "%Y-%m-%dT%H:%M:%S", read strictly.
  int y, mo, d, h, mi, s;
  if (compact_iso) {
    if (value.size() != 16 || value[8] != 'T' || value[15] != 'Z') return std::nullopt;
    y = digits(value, 0, 4), mo = digits(value, 4, 2), d = digits(value, 6, 2);
    h = digits(value, 9, 2), mi = digits(value, 11, 2), s = digits(value, 13, 2);
  } else {
    if (value.size() != 19 || value[4] != '-' || value[7] != '-' || value[10] != 'T' ||
        value[13] != ':' || value[16] != ':') {
      return std::nullopt;
    }
    y = digits(value, 0, 4), mo = digits(value, 5, 2), d = digits(value, 8, 2);
    h = digits(value, 11, 2), mi = digits(value, 14, 2), s = digits(value, 17, 2);
  }
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
      s < 0 || s > 61) {
    return std::nullopt;
  }
  return common::http::epoch_from_civil(y, mo, d, h, mi, std::min(s, 59));
}

// ---- errors ----------------------------------------------------------------------------------

S3Error S3Error::access_denied(std::string message) {
  return {.status = 403, .code = "AccessDenied", .message = std::move(message), .details = {}};
}
S3Error S3Error::signature_does_not_match() {
  return {.status = 403,
          .code = "SignatureDoesNotMatch",
          .message = "The request signature we calculated does not match the signature you "
                     "provided. Check your key and signing method.",
          .details = {}};
}
S3Error S3Error::request_time_too_skewed() {
  return {.status = 403,
          .code = "RequestTimeTooSkewed",
          .message = "The difference between the request time and the current time is too "
                     "large.",
          .details = {}};
}
S3Error S3Error::authorization_header_malformed(std::string message) {
  return {.status = 400,
          .code = "AuthorizationHeaderMalformed",
          .message = std::move(message),
          .details = {}};
}
S3Error S3Error::authorization_query_parameters_error(std::string message) {
  return {.status = 400,
          .code = "AuthorizationQueryParametersError",
          .message = std::move(message),
          .details = {}};
}
S3Error S3Error::invalid_argument(std::string name, std::string value, std::string message) {
  return {.status = 400,
          .code = "InvalidArgument",
          .message = std::move(message),
          .details = {{"ArgumentName", std::move(name)}, {"ArgumentValue", std::move(value)}}};
}
S3Error S3Error::invalid_request(std::string message) {
  return {.status = 400, .code = "InvalidRequest", .message = std::move(message), .details = {}};
}

// ---- parsing ---------------------------------------------------------------------------------

// The steps of Swift's S3Request/SigV4Request constructors that concern the signature, in
// their order (the first error wins, as Swift raises it).
struct S3AuthParser {
  const S3AuthRequest& req;
  const S3AuthConfig& config;
  const double now;
  const HeaderMap& headers;
  const Params params;
  S3Signature sig;
  std::string region;                  // the config's, or its lower-case form the client used
  std::vector<std::string> signed_headers;  // Version 4, as the client listed them

  S3AuthParser(const S3AuthRequest& r, const S3AuthConfig& c, double n)
      : req(r), config(c), now(n), headers(*r.headers), params(params_of(r.query)),
        region(c.location) {}

  bool v4_query() const { return param(params, "X-Amz-Credential") != nullptr; }
  bool v2_query() const { return param(params, "AWSAccessKeyId") != nullptr; }
  bool header_auth() const { return headers.contains("Authorization"); }

  // The header fields a signature covers: as received when WSGI's names lost an underscore.
  const std::vector<std::pair<std::string, std::string>>& signed_fields() const {
    if (req.raw_headers && !req.raw_headers->empty()) return *req.raw_headers;
    return headers.fields();
  }

  // The time the client signed at, as signing_timestamp reads it.
  std::optional<S3Error> signing_time(bool v4) {
    std::optional<int64_t> t;
    if (v4 && v4_query() && param(params, "X-Amz-Date")) {
      t = parse_s3_time(*param(params, "X-Amz-Date"), true);
    } else if (!v4 && v2_query() && param(params, "Timestamp")) {
      t = parse_s3_time(*param(params, "Timestamp"), false);
    } else if (v4) {
      auto amz = headers.get("X-Amz-Date");
      if (amz && !amz->empty()) {
        t = parse_s3_time(*amz, true);
      } else if (auto date = headers.get("Date")) {
        t = parse_s3_time(*date, false);
      }
    } else {
      auto value = headers.get("X-Amz-Date");
      if (!value) value = headers.get("Date");
      if (value) t = parse_s3_time(*value, false);
    }
    if (!t || *t < 0) return S3Error::access_denied(std::string(kValidDate));
    if (*t > kMaxTimestamp) return S3Error::request_time_too_skewed();
    sig.signing_time_ = *t;
    sig.amz_date_ = amz_date(*t);
    return std::nullopt;
  }

  // S3Request._validate_dates (header auth, both versions).
  std::optional<S3Error> validate_dates(bool v4) {
    auto date = headers.get("Date");
    auto amz = headers.get("X-Amz-Date");
    if ((!date || date->empty()) && (!amz || amz->empty())) {
      return S3Error::access_denied(std::string(kValidDate));
    }
    if (auto e = signing_time(v4)) return e;
    int64_t delta = sig.signing_time_ - static_cast<int64_t>(now);
    if (delta < 0) delta = -delta;
    if (delta > config.allowable_clock_skew) return S3Error::request_time_too_skewed();
    return std::nullopt;
  }

  std::optional<S3Error> parse_v2() {
    if (v2_query()) {
      sig.presigned_ = true;
      const std::string* expires = param(params, "Expires");
      std::optional<double> ex;
      if (expires) {
        try {
          size_t used = 0;
          std::string t = trim(*expires);
          double v = std::stod(t, &used);
          if (used == t.size() && std::isfinite(v) && v >= 0) ex = v;
        } catch (...) {
        }
      }
      if (!ex) return S3Error::access_denied();
      if (now > *ex) return S3Error::access_denied("Request has expired");
      if (*ex >= 2147483648.0) {
        return S3Error::access_denied("Invalid date (should be seconds since epoch): " +
                                      *expires);
      }
      const std::string* access = param(params, "AWSAccessKeyId");
      const std::string* signature = param(params, "Signature");
      if (!access || !signature || access->empty() || signature->empty() || expires->empty()) {
        return S3Error::access_denied();
      }
      sig.access_key_ = *access;
      sig.signature_ = *signature;
      return std::nullopt;
    }
    if (auto e = validate_dates(false)) return e;
    std::string_view auth = headers.get_or("Authorization", "");
    if (!auth.starts_with("AWS ") || auth.find(':') == std::string_view::npos) {
      return S3Error::access_denied();
    }
    std::string_view rest = auth.substr(4);
    size_t colon = rest.rfind(':');
    sig.access_key_ = std::string(rest.substr(0, colon));
    sig.signature_ = std::string(rest.substr(colon + 1));
    return std::nullopt;
  }

  // One credential component against the scope Apus expects; `what` picks the message family.
  std::optional<S3Error> check_scope(const std::vector<std::string>& cred, bool query) {
    const std::string expected[4] = {sig.amz_date_.substr(0, 8), config.location, "s3",
                                     "aws4_request"};
    for (size_t i = 0; i < 4; ++i) {
      if (cred[i + 1] == expected[i]) continue;
      if (i == 1 && !is_lower(expected[i]) && cred[i + 1] == lower(expected[i])) {
        region = lower(expected[i]);  // lower-case region names (AWS SDK for .NET)
        continue;
      }
      std::string message;
      const std::string& got = cred[i + 1];
      const std::string& want = expected[i];
      const std::string prefix = query ? "Error parsing the X-Amz-Credential parameter; "
                                       : "The authorization header is malformed; ";
      switch (i) {
        case 0:
          message = "Invalid credential date \"" + got + "\". This date is not the same as "
                    "X-Amz-Date: \"" + want + "\".";
          break;
        case 1:
          message = prefix + "the region '" + got + "' is wrong; expecting '" + want + "'";
          break;
        case 2:
          message = prefix + "incorrect service \"" + got + "\". This endpoint belongs to \"" +
                    want + "\".";
          break;
        default:
          message = prefix + "incorrect terminal \"" + got + "\". This endpoint uses \"" +
                    want + "\".";
      }
      S3Error e = query ? S3Error::authorization_query_parameters_error(message)
                        : S3Error::authorization_header_malformed(message);
      if (i == 1) e.details.emplace_back("Region", want);
      return e;
    }
    return std::nullopt;
  }

  static std::optional<std::vector<std::string>> credential(std::string_view value) {
    std::vector<std::string> parts;
    for (;;) {
      size_t slash = value.find('/');
      parts.emplace_back(value.substr(0, slash));
      if (slash == std::string_view::npos) break;
      value.remove_prefix(slash + 1);
    }
    if (parts[0].empty() || parts.size() != 5) return std::nullopt;
    return parts;
  }

  static std::vector<std::string> split_signed_headers(std::string_view value) {
    std::vector<std::string> out;
    for (;;) {
      size_t semi = value.find(';');
      out.emplace_back(value.substr(0, semi));
      if (semi == std::string_view::npos) return out;
      value.remove_prefix(semi + 1);
    }
  }

  std::optional<S3Error> parse_v4() {
    sig.version_ = S3Signature::Version::kV4;
    if (v4_query()) {
      sig.presigned_ = true;
      // _validate_expire_param
      const std::string* expires = param(params, "X-Amz-Expires");
      if (!expires) return S3Error::access_denied();
      // Python's int(): any size. Below zero, or 2^63 and more ("should be a number"), are
      // told apart from the sign of a saturated read and the failure of an exact one.
      auto n = common::parse_python_int_saturating(*expires);
      auto exact = common::parse_python_int(*expires);
      std::optional<std::string> err;
      if (!n) {
        err = "X-Amz-Expires should be a number";
      } else if (*n < 0) {
        err = "X-Amz-Expires must be non-negative";
      } else if (!exact) {
        err = "X-Amz-Expires should be a number";
      } else if (*n > kOneWeek) {
        err = "X-Amz-Expires must be less than a week (in seconds); that is, the given "
              "X-Amz-Expires must be less than 604800 seconds";
      }
      if (err) return S3Error::authorization_query_parameters_error(*err);
      if (auto e = signing_time(true)) return e;
      // Against the clock with its fraction, as Swift: X-Amz-Expires=0 is expired at once.
      if (static_cast<double>(sig.signing_time_ + *n) < now) {
        return S3Error::access_denied("Request has expired");
      }
      // _parse_query_authentication
      const std::string* algorithm = param(params, "X-Amz-Algorithm");
      if (!algorithm || *algorithm != kV4Algorithm) {
        return S3Error::invalid_argument("X-Amz-Algorithm", algorithm ? *algorithm : "");
      }
      auto cred = credential(*param(params, "X-Amz-Credential"));
      const std::string* signature = param(params, "X-Amz-Signature");
      if (!cred || !signature || signature->empty()) return S3Error::access_denied();
      const std::string* signed_list = param(params, "X-Amz-SignedHeaders");
      if (!signed_list) return S3Error::authorization_header_malformed();
      signed_headers = split_signed_headers(*signed_list);
      if (auto e = check_scope(*cred, true)) return e;
      sig.access_key_ = (*cred)[0];
      sig.signature_ = *signature;
      return std::nullopt;
    }
    if (auto e = validate_dates(true)) return e;
    std::string_view auth = headers.get_or("Authorization", "");
    auto after = [&](std::string_view key) -> std::string_view {
      size_t at = auth.find(key);
      if (at == std::string_view::npos) return {};
      std::string_view v = auth.substr(at + key.size());
      return v.substr(0, v.find(','));
    };
    auto cred = credential(after("Credential="));
    if (!cred) return S3Error::access_denied();
    std::string_view signature = after("Signature=");
    if (signature.empty()) return S3Error::access_denied();
    std::string_view signed_list = after("SignedHeaders=");
    if (signed_list.empty()) return S3Error::authorization_header_malformed();
    if (auto e = check_scope(*cred, false)) return e;
    signed_headers = split_signed_headers(signed_list);
    sig.access_key_ = (*cred)[0];
    sig.signature_ = std::string(signature);
    return std::nullopt;
  }

  // ---- what is signed ----

  void sign_v2() {
    sig.string_to_sign_ = v2_string_to_sign(false);
    std::string_view path = req.raw_path;
    if (req.bucket_in_host.empty() && path.size() > 1 && path.find('/', 1) == std::string_view::npos) {
      sig.v2_bucket_slash_string_to_sign_ = v2_string_to_sign(true);
    }
  }

  // `bucket_slash`: the path (a bucket's) with a '/' after it.
  std::string v2_string_to_sign(bool bucket_slash) const {
    std::string out(req.method);
    out.push_back('\n');
    out += header_strip(headers.get("Content-MD5")).value_or("");
    out.push_back('\n');
    out += header_strip(headers.get("Content-Type")).value_or("");
    // x-amz-* headers: names lower-cased, values trimmed, repeats joined with ','.
    std::map<std::string, std::string> amz;
    for (const auto& [name, value] : signed_fields()) {
      std::string key = lower(name);
      if (!key.starts_with("x-amz-")) continue;
      key = trim(key);
      auto [it, fresh] = amz.try_emplace(key, trim(value));
      if (!fresh) it->second += "," + trim(value);
    }
    if (!sig.presigned_) {
      if (amz.count("x-amz-date")) {
        out += "\n";
      } else if (auto date = headers.get("Date")) {
        out += "\n" + std::string(*date);
      }
    } else {
      out += "\n" + *param(params, "Expires");
    }
    for (const auto& [k, v] : amz) out += "\n" + k + ":" + v;
    std::string path;
    if (!req.bucket_in_host.empty()) path = "/" + std::string(req.bucket_in_host);
    path += req.raw_path;
    if (bucket_slash) path += "/";
    std::string sub;
    if (!req.query.empty()) {
      for (const auto& [k, v] : params) {
        if (!std::binary_search(std::begin(kSubResources), std::end(kSubResources), k)) continue;
        sub += sub.empty() ? "?" : "&";
        sub += v.empty() ? k : k + "=" + v;
      }
    }
    out += "\n" + path + sub;
    return out;
  }

  // Version 4's canonical headers, or the error Swift answers instead.
  std::optional<S3Error> v4_canonical_headers(std::string& lines, std::string& names) const {
    // Names lower-cased and trimmed; values stripped, inner whitespace runs made one space;
    // repeats joined with ','. Kept in arrival order for the unsigned-header check.
    std::vector<std::pair<std::string, std::string>> fields;
    for (const auto& [name, value] : signed_fields()) {
      std::string key = trim(lower(name));
      std::string v;
      for (const auto& word : common::split_words(header_strip(value).value_or(""))) {
        if (!v.empty()) v.push_back(' ');
        v += word;
      }
      auto it = std::find_if(fields.begin(), fields.end(),
                             [&](const auto& f) { return f.first == key; });
      if (it == fields.end()) {
        fields.emplace_back(std::move(key), std::move(v));
      } else {
        it->second += "," + v;
      }
    }
    std::set<std::string> wanted(signed_headers.begin(), signed_headers.end());
    for (const auto& [key, value] : fields) {
      if (wanted.count(key)) continue;
      for (std::string_view prefix : kMustBeSigned) {
        if (key.starts_with(prefix)) {
          S3Error e = S3Error::access_denied(
              "There were headers present in the request which were not signed");
          e.details.emplace_back("HeadersNotSigned", key);
          return e;
        }
      }
    }
    // Boto before 2.9.3 signs the Host without its port.
    auto agent = std::find_if(fields.begin(), fields.end(),
                              [](const auto& f) { return f.first == "user-agent"; });
    if (agent != fields.end()) {
      const std::string& ua = agent->second;
      if (ua.size() >= 10 && ua.starts_with("Boto/2") &&
          std::isdigit(static_cast<unsigned char>(ua[7])) && ua[9] >= '0' && ua[9] <= '2') {
        for (auto& f : fields) {
          if (f.first == "host") f.second = f.second.substr(0, f.second.find(':'));
        }
      }
    }
    std::sort(fields.begin(), fields.end());
    size_t matched = 0;
    for (const auto& [key, value] : fields) {
      if (!wanted.count(key)) continue;
      ++matched;
      lines += key + ":" + value + "\n";
      if (!names.empty()) names.push_back(';');
      names += key;
    }
    if (matched != wanted.size()) return S3Error::signature_does_not_match();
    return std::nullopt;
  }

  std::optional<S3Error> v4_string_to_sign() {
    std::string lines, names;
    if (auto e = v4_canonical_headers(lines, names)) return e;
    // The method upper-cased, as Swift's and botocore's canonical requests have it.
    std::string cr;
    for (char c : req.method) cr.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    cr += "\n" + common::http::quote(common::http::percent_decode(req.raw_path), "/");
    cr += "\n";
    bool first = true;
    for (const auto& [k, v] : params) {
      if (k == "Signature" || k == "X-Amz-Signature") continue;
      if (!first) cr.push_back('&');
      first = false;
      cr += common::http::quote(k, "") + "=" + common::http::quote(v, "");
    }
    cr += "\n" + lines + "\n" + names + "\n";
    cr += headers.get_or("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD");
    sig.scope_ = sig.amz_date_.substr(0, 8) + "/" + region + "/s3/aws4_request";
    sig.string_to_sign_ = std::string(kV4Algorithm) + "\n" + sig.amz_date_ + "\n" + sig.scope_ +
                          "\n" + common::crypto::sha256_hex(cr);
    sig.canonical_request_ = std::move(cr);
    return std::nullopt;
  }
};

S3AuthOutcome parse_s3_auth(const S3AuthRequest& req, const S3AuthConfig& config, double now) {
  S3AuthParser p(req, config, now);
  S3AuthOutcome out;
  bool v4 = p.v4_query() ||
            p.headers.get_or("Authorization", "").starts_with(std::string(kV4Algorithm) + " ");
  if (v4 ? !(p.v4_query() || p.header_auth()) : !(p.v2_query() || p.header_auth())) return out;
  out.is_s3 = true;
  if (auto e = v4 ? p.parse_v4() : p.parse_v2()) {
    out.error = std::move(e);
    return out;
  }
  if (v4) {
    if (auto e = p.v4_string_to_sign()) {
      out.error = std::move(e);
      return out;
    }
  } else {
    p.sign_v2();
  }
  out.signature = std::move(p.sig);
  return out;
}

// ---- checking --------------------------------------------------------------------------------

std::variant<S3Signature, S3Error> S3Signature::for_post_policy(std::string_view access_key,
                                                               std::string_view credential,
                                                               std::string_view signature,
                                                               std::string_view policy,
                                                               const S3AuthConfig& config) {
  S3Signature sig;
  sig.signature_ = std::string(signature);
  sig.string_to_sign_ = std::string(policy);
  if (credential.empty()) {
    sig.version_ = Version::kV2;
    sig.access_key_ = std::string(access_key);
    return sig;
  }
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash = credential.find('/'); ; slash = credential.find('/', start)) {
    parts.emplace_back(credential.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  // The key itself may hold '/'; the scope is the last four parts.
  if (parts.size() < 5 || parts[parts.size() - 4].size() != 8 ||
      (parts[parts.size() - 3] != config.location &&
       parts[parts.size() - 3] != lower(config.location)) ||
      parts[parts.size() - 2] != "s3" || parts.back() != "aws4_request") {
    return S3Error::invalid_argument("x-amz-credential", std::string(credential),
                                     "Error parsing the X-Amz-Credential parameter");
  }
  sig.version_ = Version::kV4;
  sig.access_key_ = std::string(credential.substr(0, credential.size() - parts[parts.size() - 4].size() -
                                                      parts[parts.size() - 3].size() - 18));
  sig.scope_ = parts[parts.size() - 4] + "/" + parts[parts.size() - 3] + "/s3/aws4_request";
  return sig;
}

bool S3Signature::check(std::string_view secret) {
  if (!verified_secret_.empty() && common::crypto::streq_const_time(secret, verified_secret_)) {
    return true;
  }
  if (version_ == Version::kV2) {
    auto signs = [&](const std::string& string_to_sign) {
      std::string mac = common::crypto::hmac_bytes("sha1", secret, string_to_sign);
      return common::crypto::streq_const_time(signature_, common::crypto::b64encode(mac));
    };
    bool ok = signs(string_to_sign_);
    if (!ok && !v2_bucket_slash_string_to_sign_.empty() && signs(v2_bucket_slash_string_to_sign_)) {
      string_to_sign_ = v2_bucket_slash_string_to_sign_;
      ok = true;
    }
    if (ok) verified_secret_ = std::string(secret);
    return ok;
  }
  std::string key = "AWS4" + std::string(secret);
  std::string_view scope = scope_;
  for (;;) {
    size_t slash = scope.find('/');
    key = common::crypto::hmac_bytes("sha256", key, scope.substr(0, slash));
    if (slash == std::string_view::npos) break;
    scope.remove_prefix(slash + 1);
  }
  signing_key_ = key;
  chain_valid_ = common::crypto::streq_const_time(
      signature_, common::crypto::hmac_hex("sha256", signing_key_, string_to_sign_));
  if (chain_valid_) verified_secret_ = std::string(secret);
  return chain_valid_;
}

bool S3Signature::check_chunk(std::string_view chunk_sha256_hex,
                              std::string_view chunk_signature) {
  if (!chain_valid_ || signing_key_.empty()) return false;
  static const std::string kEmptySha256 = common::crypto::sha256_hex("");
  string_to_sign_ = "AWS4-HMAC-SHA256-PAYLOAD\n" + amz_date_ + "\n" + scope_ + "\n" +
                    signature_ + "\n" + kEmptySha256 + "\n" + std::string(chunk_sha256_hex);
  signature_ = std::string(chunk_signature);
  chain_valid_ = common::crypto::streq_const_time(
      signature_, common::crypto::hmac_hex("sha256", signing_key_, string_to_sign_));
  return chain_valid_;
}

bool S3Signature::check_trailer(const std::vector<std::pair<std::string, std::string>>& trailers) {
  if (!chain_valid_ || signing_key_.empty()) return false;
  std::vector<std::pair<std::string, std::string>> sorted;
  std::string given;
  for (const auto& [k, v] : trailers) {
    if (k == "x-amz-trailer-signature") {
      given = v;
    } else {
      sorted.emplace_back(k, v);
    }
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
  std::string canonical;
  for (const auto& [k, v] : sorted) canonical += k + ":" + v + "\n";
  if (canonical.empty()) canonical = "\n";
  string_to_sign_ = "AWS4-HMAC-SHA256-TRAILER\n" + amz_date_ + "\n" + scope_ + "\n" +
                    signature_ + "\n" + common::crypto::sha256_hex(canonical);
  signature_ = given;
  chain_valid_ = common::crypto::streq_const_time(
      signature_, common::crypto::hmac_hex("sha256", signing_key_, string_to_sign_));
  return chain_valid_;
}

std::vector<std::pair<std::string, std::string>> S3Signature::mismatch_details() const {
  auto hex_bytes = [](std::string_view s) {
    std::string out;
    char buf[4];
    for (unsigned char c : s) {
      std::snprintf(buf, sizeof buf, "%02x", c);
      if (!out.empty()) out.push_back(' ');
      out += buf;
    }
    return out;
  };
  std::vector<std::pair<std::string, std::string>> d = {
      {"AWSAccessKeyId", access_key_},
      {"StringToSign", string_to_sign_},
      {"SignatureProvided", signature_},
      {"StringToSignBytes", hex_bytes(string_to_sign_)}};
  if (version_ == Version::kV4) {
    d.emplace_back("CanonicalRequest", canonical_request_);
    d.emplace_back("CanonicalRequestBytes", hex_bytes(canonical_request_));
  }
  return d;
}

}  // namespace apus::proxy::s3api
