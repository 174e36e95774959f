// S3 Object Lock (object_lock.h): the model, and the operations and checks (s3_request.h).
#include "proxy/s3api/object_lock.h"

#include <cmath>
#include <cstdlib>
#include <ctime>

#include <boost/json.hpp>
#include <pugixml.hpp>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/http/url.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

namespace {

constexpr int64_t kMaxRetentionDays = 36500;  // S3's limit: 100 years
constexpr double kSecondsPerDay = 86400;

S3Error invalid_retention_period() {
  return {.status = 400, .code = "InvalidRetentionPeriod",
          .message = "Default retention period must be a positive integer value."};
}

bool known_mode(std::string_view m) { return m == "GOVERNANCE" || m == "COMPLIANCE"; }

// The bucket's default retention for a version written `now`, if it has one.
void add_default_retention(const LockConfiguration& bucket, double now,
                           std::vector<std::pair<std::string, std::string>>& out) {
  if (bucket.mode.empty()) return;
  const double days = static_cast<double>(bucket.days > 0 ? bucket.days : bucket.years * 365);
  out.emplace_back(kLockModeSysmeta, bucket.mode);
  out.emplace_back(kLockUntilSysmeta,
                   s3_xml_time(static_cast<int64_t>(std::ceil(now + days * kSecondsPerDay))));
}

}  // namespace

std::variant<LockConfiguration, S3Error> parse_lock_configuration(std::string_view xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "ObjectLockConfiguration") return errors::malformed_xml();
  if (std::string_view(root.child("ObjectLockEnabled").text().get()) != "Enabled") {
    return errors::malformed_xml();
  }
  LockConfiguration c;
  pugi::xml_node rule = root.child("Rule");
  if (!rule) return c;
  pugi::xml_node retention = rule.child("DefaultRetention");
  if (!retention) return errors::malformed_xml();
  c.mode = retention.child("Mode").text().get();
  if (!known_mode(c.mode)) return errors::malformed_xml();
  pugi::xml_node days = retention.child("Days"), years = retention.child("Years");
  if (static_cast<bool>(days) == static_cast<bool>(years)) return errors::malformed_xml();
  auto n = common::parse_python_int(days ? days.text().get() : years.text().get());
  if (!n) return errors::malformed_xml();
  // Years compared as years: a client's count of them times 365 could overflow.
  if (*n <= 0 || *n > (days ? kMaxRetentionDays : kMaxRetentionDays / 365)) {
    return invalid_retention_period();
  }
  (days ? c.days : c.years) = *n;
  return c;
}

std::string lock_configuration_document(const LockConfiguration& c) {
  pugi::xml_node root;
  pugi::xml_document doc = result_document("ObjectLockConfiguration", &root);
  add_text(root, "ObjectLockEnabled", "Enabled");
  if (!c.mode.empty()) {
    pugi::xml_node retention = root.append_child("Rule").append_child("DefaultRetention");
    add_text(retention, "Mode", c.mode);
    if (c.days > 0) add_text(retention, "Days", std::to_string(c.days));
    if (c.years > 0) add_text(retention, "Years", std::to_string(c.years));
  }
  return to_xml(doc);
}

std::string encode_lock_configuration(const LockConfiguration& c) {
  boost::json::object o;
  if (!c.mode.empty()) {
    o["Mode"] = c.mode;
    if (c.days > 0) o["Days"] = c.days;
    if (c.years > 0) o["Years"] = c.years;
  }
  return boost::json::serialize(o);
}

std::optional<LockConfiguration> decode_lock_configuration(std::string_view stored) {
  if (stored.empty()) return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(stored, ec);
  if (ec || !v.is_object()) return std::nullopt;
  LockConfiguration c;
  const auto& o = v.get_object();
  if (const auto* m = o.if_contains("Mode"); m && m->is_string()) c.mode = m->get_string();
  if (const auto* d = o.if_contains("Days"); d && d->is_int64()) c.days = d->get_int64();
  if (const auto* y = o.if_contains("Years"); y && y->is_int64()) c.years = y->get_int64();
  if (!c.mode.empty() && (!known_mode(c.mode) || (c.days <= 0) == (c.years <= 0))) {
    return std::nullopt;
  }
  return c;
}

std::optional<double> parse_iso8601(std::string_view text) {
  if (text.size() < 19 || text.size() > 40) return std::nullopt;
  std::string s(text);
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') {
    const char* start = rest;
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
    if (rest == start + 1) return std::nullopt;
    fraction = std::strtod(std::string(start, rest).c_str(), nullptr);
  }
  double offset = 0;
  if (*rest == 'Z') {
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    int hh = 0, mm = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &hh, &mm) != 2 || std::strlen(rest) != 6) {
      return std::nullopt;
    }
    offset = (*rest == '+' ? 1 : -1) * (hh * 3600.0 + mm * 60.0);
    rest += 6;
  } else {
    return std::nullopt;
  }
  if (*rest) return std::nullopt;
  return static_cast<double>(timegm(&tm)) + fraction - offset;
}

std::variant<Retention, S3Error> parse_retention(std::string_view xml, double now) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "Retention") return errors::malformed_xml();
  Retention r;
  r.mode = root.child("Mode").text().get();
  r.until = root.child("RetainUntilDate").text().get();
  if (!known_mode(r.mode)) return errors::malformed_xml();
  auto until = parse_iso8601(r.until);
  if (!until) return errors::malformed_xml();
  if (*until <= now) {
    return S3Error{.status = 400, .code = "InvalidArgument",
                   .message = "The retain until date must be in the future!"};
  }
  r.until_seconds = *until;
  return r;
}

std::string retention_document(const Retention& r) {
  pugi::xml_node root;
  pugi::xml_document doc = result_document("Retention", &root);
  add_text(root, "Mode", r.mode);
  add_text(root, "RetainUntilDate", r.until);
  return to_xml(doc);
}

std::variant<bool, S3Error> parse_legal_hold(std::string_view xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "LegalHold") return errors::malformed_xml();
  std::string_view status = root.child("Status").text().get();
  if (status != "ON" && status != "OFF") return errors::malformed_xml();
  return status == "ON";
}

std::string legal_hold_document(bool on) {
  pugi::xml_node root;
  pugi::xml_document doc = result_document("LegalHold", &root);
  add_text(root, "Status", on ? "ON" : "OFF");
  return to_xml(doc);
}

LockState lock_state(const common::http::HeaderMap& swift) {
  LockState s;
  std::string mode(swift.get_or(kLockModeSysmeta, ""));
  std::string until(swift.get_or(kLockUntilSysmeta, ""));
  if (known_mode(mode)) {
    if (auto seconds = parse_iso8601(until)) {
      s.retention = Retention{.mode = mode, .until = until, .until_seconds = *seconds};
    }
  }
  s.legal_hold = swift.get_or(kLegalHoldSysmeta, "") == "ON";
  return s;
}

bool deletion_refused(const LockState& s, double now, bool bypass_governance) {
  if (s.legal_hold) return true;
  if (!s.retention || s.retention->until_seconds <= now) return false;
  return !(s.retention->mode == "GOVERNANCE" && bypass_governance);
}

bool retention_change_allowed(const LockState& s, const Retention& next, double now,
                              bool bypass_governance) {
  if (!s.retention || s.retention->until_seconds <= now) return true;
  const Retention& was = *s.retention;
  const bool as_long = next.until_seconds >= was.until_seconds;
  if (was.mode == "COMPLIANCE") return next.mode == "COMPLIANCE" && as_long;
  return bypass_governance || (next.mode == "GOVERNANCE" && as_long);
}

void add_lock_headers(const common::http::HeaderMap& swift, common::http::HeaderMap& s3) {
  LockState s = lock_state(swift);
  if (s.retention) {
    s3.set("x-amz-object-lock-mode", s.retention->mode);
    s3.set("x-amz-object-lock-retain-until-date", s.retention->until);
  }
  if (!swift.get_or(kLegalHoldSysmeta, "").empty()) {
    s3.set("x-amz-object-lock-legal-hold", s.legal_hold ? "ON" : "OFF");
  }
}

std::variant<std::vector<std::pair<std::string, std::string>>, S3Error> lock_for_write(
    const common::http::HeaderMap& client, const std::optional<LockConfiguration>& bucket,
    double now) {
  std::vector<std::pair<std::string, std::string>> out;
  auto mode = client.get("x-amz-object-lock-mode");
  auto until = client.get("x-amz-object-lock-retain-until-date");
  auto hold = client.get("x-amz-object-lock-legal-hold");
  if (!mode && !until && !hold) {
    if (bucket) add_default_retention(*bucket, now, out);
    return out;
  }
  if (!bucket) {
    return S3Error::invalid_request("Bucket is missing ObjectLockConfiguration");
  }
  if (static_cast<bool>(mode) != static_cast<bool>(until)) {
    return S3Error::invalid_argument(
        mode ? "x-amz-object-lock-mode" : "x-amz-object-lock-retain-until-date",
        std::string(mode ? *mode : *until),
        "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied");
  }
  if (mode) {
    if (!known_mode(*mode)) {
      return S3Error::invalid_argument("x-amz-object-lock-mode", std::string(*mode),
                                       "Unknown wormMode directive.");
    }
    auto seconds = parse_iso8601(*until);
    if (!seconds) {
      return S3Error::invalid_argument("x-amz-object-lock-retain-until-date", std::string(*until),
                                       "The retain until date must be provided in ISO 8601 "
                                       "format");
    }
    if (*seconds <= now) {
      return S3Error::invalid_argument("x-amz-object-lock-retain-until-date", std::string(*until),
                                       "The retain until date must be in the future!");
    }
    out.emplace_back(kLockModeSysmeta, std::string(*mode));
    out.emplace_back(kLockUntilSysmeta, std::string(*until));
  } else {
    add_default_retention(*bucket, now, out);
  }
  if (hold) {
    if (*hold != "ON" && *hold != "OFF") {
      return S3Error::invalid_argument("x-amz-object-lock-legal-hold", std::string(*hold),
                                       "Legal Hold must be either of 'ON' or 'OFF'");
    }
    out.emplace_back(kLegalHoldSysmeta, std::string(*hold));
  }
  return out;
}

// ---- the operations ---------------------------------------------------------------------------

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

namespace {

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// x-amz-bypass-governance-retention: true, from who may bypass: with s3_acl the users of the
// bucket's account, and others the policy grants s3:BypassGovernanceRetention; without it,
// whoever Swift let write.
bool bypass_governance(const S3Request& s3, const std::string& key) {
  if (!common::http::iequals(s3.client.headers.get_or("x-amz-bypass-governance-retention", ""),
                             "true")) {
    return false;
  }
  if (!s3.config.s3_acl) return true;
  if (!s3.requester_account().empty() && s3.requester_account() == bucket_holder(s3)) return true;
  return policy_allows(s3, "s3:BypassGovernanceRetention", key);
}

S3Error invalid_bucket_state(std::string message) {
  return {.status = 409, .code = "InvalidBucketState", .message = std::move(message)};
}

S3Error no_lock_configuration() {
  return {.status = 400, .code = "InvalidRequest",
          .message = "Bucket is missing Object Lock Configuration"};
}

// The version the request names (or the current one): its HEAD answer, or the error.
net::awaitable<std::variant<Response, S3Error>> head_version(S3Request& s3) {
  auto v = s3.params.find("versionId");
  std::string query =
      v == s3.params.end() ? "" : "version-id=" + common::http::quote(v->second, "");
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, query, 1 << 16,
                                  [](HeaderMap& h) { h = own_headers(h); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  Response& r = std::get<Response>(head);
  if (r.status == 404) co_return co_await object_not_found(s3);
  if (r.status != 200) co_return unexpected(s3, r);
  co_return std::move(r);
}

// Sets lock metadata on the version `object` is the HEAD of (the current one only: Swift's
// object_versioning takes a POST for that one alone).
net::awaitable<std::optional<S3Error>> set_lock_metadata(
    S3Request& s3, const Response& object,
    const std::vector<std::pair<std::string_view, std::string>>& values) {
  const std::string version(object.headers.get_or("X-Object-Version-Id", ""));
  if (s3.has("versionId")) {
    auto current = co_await call_swift(s3, "HEAD", s3.bucket, s3.key, "", 1 << 16,
                                       [](HeaderMap& h) { h = own_headers(h); });
    if (auto* e = std::get_if<S3Error>(&current)) co_return std::move(*e);
    const Response& c = std::get<Response>(current);
    if (c.status != 200 || c.headers.get_or("X-Object-Version-Id", "") != version) {
      co_return errors::not_implemented(
          "Changing the lock of a version that is not the current one is not supported.");
    }
  }
  auto post = co_await call_swift(s3, "POST", s3.bucket, s3.key, "", 1 << 16, [&](HeaderMap& h) {
    h = own_headers(h);
    keep_object_metadata(object.headers, h);
    for (const auto& [name, value] : values) h.set(name, value);
  });
  if (auto* e = std::get_if<S3Error>(&post)) co_return std::move(*e);
  const Response& p = std::get<Response>(post);
  if (p.status == 404) co_return co_await object_not_found(s3);
  if (p.status != 202 && p.status != 204) co_return unexpected(s3, p);
  co_return std::nullopt;
}

Response lock_answer(const S3Request& s3, int status, std::string body, const Response& object) {
  Response out = body.empty() ? Response{} : xml_response(status, std::move(body), s3.env.trans_id);
  out.status = status;
  set_request_ids(out.headers, s3.env.trans_id);
  if (auto v = object.headers.get("X-Object-Version-Id"); v && !v->empty()) {
    out.headers.set("x-amz-version-id", *v);
  }
  return out;
}

}  // namespace

net::awaitable<CachedInfo> bucket_info(S3Request& s3) {
  if (!s3.bucket_info_read) {
    const std::string& account = bucket_holder(s3);
    s3.bucket_info_read = account.empty() ? CachedInfo{}
                                          : co_await s3.config.info->container_info(
                                                account, s3.bucket, s3.client, s3.env);
  }
  co_return *s3.bucket_info_read;
}

net::awaitable<std::optional<LockConfiguration>> bucket_lock(S3Request& s3) {
  if (s3.bucket_lock_read) co_return *s3.bucket_lock_read;
  CachedInfo info = co_await bucket_info(s3);
  if (info.status < 200 || info.status >= 300) co_return std::nullopt;
  co_return decode_lock_configuration(info.headers.get_or(kObjectLockSysmeta, ""));
}

net::awaitable<std::variant<LockHeaders, S3Error>> new_version_lock(S3Request& s3) {
  auto bucket = co_await bucket_lock(s3);
  auto lock = lock_for_write(s3.client.headers, bucket, now_seconds());
  if (auto* e = std::get_if<S3Error>(&lock)) co_return std::move(*e);
  co_return std::move(std::get<LockHeaders>(lock));
}

net::awaitable<Response> object_lock_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT") {
    co_return s3.error(errors::method_not_allowed(method, "OBJECTLOCK"));
  }
  auto headers = co_await bucket_headers(s3);
  if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
  const HeaderMap& b = std::get<HeaderMap>(headers);
  auto stored = decode_lock_configuration(b.get_or(kObjectLockSysmeta, ""));
  if (method == "GET") {
    if (!stored) {
      co_return s3.error({.status = 404, .code = "ObjectLockConfigurationNotFoundError",
                          .message = "Object Lock configuration does not exist for this bucket",
                          .details = {{"BucketName", s3.bucket}}});
    }
    co_return xml_response(200, lock_configuration_document(*stored), s3.env.trans_id);
  }
  auto body = co_await read_configuration(ex, s3, 64 * 1024);
  if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
  auto parsed = parse_lock_configuration(std::get<std::string>(body));
  if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
  // A bucket without Object Lock takes it once its versioning is on (as S3 now allows).
  if (!stored && !common::config_true_value(
                     b.get_or("X-Container-Sysmeta-Versions-Enabled", ""))) {
    co_return s3.error(invalid_bucket_state(
        "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"));
  }
  if (auto e = co_await set_bucket_sysmeta(
          s3, kObjectLockSysmeta, encode_lock_configuration(std::get<LockConfiguration>(parsed)))) {
    co_return s3.error(*e);
  }
  co_return configuration_answer(s3);
}

net::awaitable<Response> retention_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT") {
    co_return s3.error(errors::method_not_allowed(method, "RETENTION"));
  }
  std::optional<Retention> next;
  if (method == "PUT") {
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto parsed = parse_retention(std::get<std::string>(body), now_seconds());
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    next = std::get<Retention>(parsed);
  }
  if (!co_await bucket_lock(s3)) co_return s3.error(no_lock_configuration());
  auto head = co_await head_version(s3);
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& object = std::get<Response>(head);
  LockState state = lock_state(object.headers);
  if (!next) {
    if (!state.retention) {
      co_return s3.error({.status = 404, .code = "NoSuchObjectLockConfiguration",
                          .message = "The specified object does not have a ObjectLock "
                                     "configuration"});
    }
    co_return lock_answer(s3, 200, retention_document(*state.retention), object);
  }
  if (!retention_change_allowed(state, *next, now_seconds(), bypass_governance(s3, *s3.key))) {
    co_return s3.error(S3Error::access_denied());
  }
  if (auto e = co_await set_lock_metadata(
          s3, object, {{kLockModeSysmeta, next->mode}, {kLockUntilSysmeta, next->until}})) {
    co_return s3.error(*e);
  }
  co_return lock_answer(s3, 200, "", object);
}

net::awaitable<Response> legal_hold_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method != "GET" && method != "PUT") {
    co_return s3.error(errors::method_not_allowed(method, "LEGALHOLD"));
  }
  std::optional<bool> on;
  if (method == "PUT") {
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto parsed = parse_legal_hold(std::get<std::string>(body));
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    on = std::get<bool>(parsed);
  }
  if (!co_await bucket_lock(s3)) co_return s3.error(no_lock_configuration());
  auto head = co_await head_version(s3);
  if (auto* e = std::get_if<S3Error>(&head)) co_return s3.error(*e);
  const Response& object = std::get<Response>(head);
  if (!on) {
    std::string_view hold = object.headers.get_or(kLegalHoldSysmeta, "");
    if (hold.empty()) {
      co_return s3.error({.status = 404, .code = "NoSuchObjectLockConfiguration",
                          .message = "The specified object does not have a ObjectLock "
                                     "configuration"});
    }
    co_return lock_answer(s3, 200, legal_hold_document(hold == "ON"), object);
  }
  if (auto e = co_await set_lock_metadata(s3, object, {{kLegalHoldSysmeta, *on ? "ON" : "OFF"}})) {
    co_return s3.error(*e);
  }
  co_return lock_answer(s3, 200, "", object);
}

net::awaitable<std::optional<S3Error>> version_delete_refused(S3Request& s3, const std::string& key,
                                                              const std::string& version) {
  if (version.empty() || version == "null" || !co_await bucket_lock(s3)) co_return std::nullopt;
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, key,
                                  "version-id=" + common::http::quote(version, ""), 1 << 16,
                                  [](HeaderMap& h) { h = own_headers(h); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  const Response& r = std::get<Response>(head);
  if (r.status != 200) co_return std::nullopt;  // not there (or a delete marker): nothing kept
  if (deletion_refused(lock_state(r.headers), now_seconds(), bypass_governance(s3, key))) {
    co_return S3Error::access_denied();
  }
  co_return std::nullopt;
}

}  // namespace apus::proxy::s3api
