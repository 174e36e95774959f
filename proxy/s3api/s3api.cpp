// s3api (s3api.h): request parsing, dispatch, and the operations served so far.
#include "proxy/s3api/s3api.h"

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <variant>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/http/date.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/utf8.h"
#include "proxy/s3api/s3_auth.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace s3api {

bool valid_bucket_name(std::string_view name, bool dns_compliant) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  const size_t max_len = dns_compliant ? 63 : 255;
  if (name.size() < 3 || name.size() > max_len || !alnum(name.front())) return false;
  if (dns_compliant && (name.find(".-") != std::string_view::npos ||
                        name.find("-.") != std::string_view::npos ||
                        name.find("..") != std::string_view::npos || !alnum(name.back()))) {
    return false;
  }
  if (name.back() == '.') return false;
  // An IPv4 address in dotted decimal (each part 0-255 without leading zeros).
  auto is_ip = [&] {
    int parts = 0;
    size_t i = 0;
    while (i <= name.size()) {
      size_t dot = name.find('.', i);
      std::string_view p = name.substr(i, dot == std::string_view::npos ? name.npos : dot - i);
      if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
      int v = 0;
      for (char c : p) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
        v = v * 10 + (c - '0');
      }
      if (v > 255) return false;
      ++parts;
      if (dot == std::string_view::npos) break;
      i = dot + 1;
    }
    return parts == 4;
  };
  if (is_ip()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
              (!dns_compliant && ((c >= 'A' && c <= 'Z') || c == '_'));
    if (!ok) return false;
  }
  return true;
}

namespace {

// The largest CreateBucketConfiguration body read (Swift's MAX_PUT_BUCKET_BODY_SIZE).
constexpr size_t kMaxPutBucketBody = 10240;
// The largest account listing read for ListBuckets.
constexpr size_t kMaxAccountListing = 64u << 20;

struct S3ApiConfig {
  S3AuthConfig auth;
  std::vector<std::string> storage_domains;
  bool dns_compliant_bucket_names = true;
  int64_t max_bucket_listing = 1000;
};

constexpr int64_t kMax32BitInt = 2147483647;

// One S3 request being served.
struct S3Request {
  const Request& client;
  ProxyEnv& env;
  const Next& next;
  std::string bucket;               // empty: the service (ListBuckets)
  std::optional<std::string> key;   // the object key, if any
  std::map<std::string, std::string> params;
  std::shared_ptr<S3Signature> signature;
  bool acl_header_used = false;     // x-amz-acl went into a subrequest already

  bool has(std::string_view p) const { return params.count(std::string(p)) > 0; }
  // The user, as Swift's s3api names it for tempauth (Owner/ID): the access key.
  const std::string& user_id() const { return signature->access_key(); }
  Response error(const S3Error& e) const { return error_response(e, env.trans_id); }
};

// A Swift answer, or the S3 error that stands for it.
using SwiftAnswer = std::variant<Response, S3Error>;

// Swift's translation of x-amz-acl into container ACL headers.
std::optional<S3Error> add_acl_headers(std::string_view acl, HeaderMap& h) {
  if (acl == "public-read") {
    h.set("X-Container-Read", ".r:*,.rlistings");
  } else if (acl == "public-read-write") {
    h.set("X-Container-Write", ".r:*");
    h.set("X-Container-Read", ".r:*,.rlistings");
  } else if (acl == "private" || acl == "bucket-owner-full-control" ||
             acl == "bucket-owner-read") {
    h.set("X-Container-Write", ".");
    h.set("X-Container-Read", ".");
  } else if (acl == "authenticated-read" || acl == "log-delivery-write") {
    return errors::not_implemented();
  } else {
    return S3Error::invalid_argument("x-amz-acl", std::string(acl));
  }
  return std::nullopt;
}

// A Swift request for the S3 request `s3` on `bucket`/`key`, as Swift's to_swift_req() builds
// it: the client's headers (x-amz-meta-* as X-Object-Meta-*), the path naming the access key
// (the auth middleware puts the account in its place), and `query`.
Result<Request> swift_request(S3Request& s3, const std::string& method, const std::string& bucket,
                              const std::optional<std::string>& key, std::string query,
                              std::optional<S3Error>* refusal) {
  HeaderMap h;
  for (const auto& [name, value] : s3.client.headers) {
    if (common::http::iequals(name, "Content-Length") ||
        common::http::iequals(name, "Transfer-Encoding") ||
        common::http::iequals(name, "Expect")) {
      continue;
    }
    if (common::http::istarts_with(name, "x-amz-meta-")) {
      std::string rest = common::http::to_lower(std::string_view(name).substr(11));
      // S3 ignores user metadata whose name has any of these.
      if (rest.find_first_of(" \"),/;<=>?@[\\]{}") != std::string::npos) continue;
      std::string swift_name = "X-Object-Meta-";
      for (char c : rest) {
        if (c == '_') {
          swift_name += "=5F";
        } else {
          swift_name.push_back(c);
        }
      }
      if (auto existing = h.get(swift_name)) {
        h.set(swift_name, std::string(*existing) + "," + value);
      } else {
        h.add(swift_name, value);
      }
      continue;
    }
    if (common::http::iequals(name, "x-amz-acl")) continue;
    h.add(name, value);
  }
  if (auto acl = s3.client.headers.get("x-amz-acl"); acl && !s3.acl_header_used) {
    s3.acl_header_used = true;
    if (auto e = add_acl_headers(*acl, h)) {
      *refusal = std::move(e);
      return common::Status::invalid_argument("x-amz-acl");
    }
  }
  const std::string& account =
      s3.signature->account().empty() ? s3.signature->access_key() : s3.signature->account();
  std::string path = "/v1/" + account;
  if (!bucket.empty()) path += "/" + bucket;
  if (key) path += "/" + *key;
  return make_subrequest(method, path, query, std::move(h));
}

// Runs a Swift request for `s3` and collects its (small) answer.
net::awaitable<SwiftAnswer> call_swift(S3Request& s3, const std::string& method,
                                       const std::string& bucket,
                                       const std::optional<std::string>& key,
                                       std::string query = {}, size_t max_body = 1 << 20) {
  std::optional<S3Error> refusal;
  auto req = swift_request(s3, method, bucket, key, std::move(query), &refusal);
  if (!req.ok()) co_return refusal ? *refusal : errors::internal_error();
  ProxyEnv env = subrequest_env(s3.env, "S3");
  env.s3_signature = s3.signature;
  auto answer = co_await run_subrequest(s3.next, std::move(*req), std::move(env), max_body);
  if (!answer.ok()) {
    APUS_LOG_DEBUG("s3api: " + method + " subrequest failed: " + answer.status().to_string());
    co_return errors::internal_error();
  }
  co_return std::move(*answer);
}

// The S3 error for a Swift status no operation expects (the end of Swift's _get_response).
S3Error unexpected(const S3Request& s3, const Response& r) {
  switch (r.status) {
    case 400:
      return S3Error::invalid_request(r.body);
    case 401: {
      S3Error e = S3Error::signature_does_not_match();
      e.details = s3.signature->mismatch_details();
      return e;
    }
    case 403:
      return S3Error::access_denied();
    case 503:
      return errors::service_unavailable();
    case 498:
    case 429:
      return errors::slow_down();
    case 409:
      return errors::service_unavailable();
    default: {
      S3Error e = errors::internal_error();
      e.message = "unexpected status code " + std::to_string(r.status);
      return e;
    }
  }
}

// ---- the service: ListBuckets ------------------------------------------------------------------

net::awaitable<Response> list_buckets(S3Request& s3, const S3ApiConfig& config) {
  auto answer = co_await call_swift(s3, "GET", "", std::nullopt, "format=json", kMaxAccountListing);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status != 200) co_return s3.error(unexpected(s3, r));
  boost::system::error_code ec;
  auto listing = boost::json::parse(r.body, ec);
  if (ec || !listing.is_array()) co_return s3.error(errors::internal_error());
  pugi::xml_node root;
  auto doc = result_document("ListAllMyBucketsResult", &root);
  pugi::xml_node owner = root.append_child("Owner");
  add_text(owner, "ID", s3.user_id());
  add_text(owner, "DisplayName", s3.user_id());
  pugi::xml_node buckets = root.append_child("Buckets");
  for (const auto& item : listing.as_array()) {
    if (!item.is_object() || !item.as_object().contains("name")) continue;
    const auto& name = item.as_object().at("name");
    if (!name.is_string()) continue;
    std::string n(name.as_string());
    if (!valid_bucket_name(n, config.dns_compliant_bucket_names)) continue;
    pugi::xml_node b = buckets.append_child("Bucket");
    add_text(b, "Name", n);
    // Swift keeps no creation time a client could use; s3api answers this fixed one.
    add_text(b, "CreationDate", "2009-02-03T16:45:09.000Z");
  }
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

// ---- buckets ---------------------------------------------------------------------------------

net::awaitable<Response> head_bucket(S3Request& s3) {
  auto answer = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  Response out;
  out.status = 200;
  out.headers = swift_to_s3_headers(r.headers);
  out.headers.set("x-amz-id-2", s3.env.trans_id);
  out.headers.set("x-amz-request-id", s3.env.trans_id);
  co_return out;
}

// The body of a bucket PUT: nothing, or a CreateBucketConfiguration naming this location.
net::awaitable<std::optional<S3Error>> check_location(Exchange& ex, const S3ApiConfig& config) {
  const Request& req = ex.request();
  if (auto te = req.headers.get("Transfer-Encoding");
      te && common::http::to_lower(*te) != "chunked") {
    S3Error e = errors::not_implemented(
        "A header you provided implies functionality that is not implemented");
    e.details.emplace_back("Header", "Transfer-Encoding");
    co_return e;
  }
  if (req.content_length && *req.content_length > kMaxPutBucketBody) {
    co_return errors::malformed_xml();
  }
  if (!req.chunked && req.content_length.value_or(0) == 0) co_return std::nullopt;
  std::string body;
  std::array<char, 4096> buf;
  for (;;) {
    auto n = co_await ex.read_body(std::span<char>(buf.data(), buf.size()));
    if (!n.ok()) co_return errors::internal_error();
    if (*n == 0) break;
    body.append(buf.data(), *n);
    if (body.size() > kMaxPutBucketBody) co_return errors::malformed_xml();
  }
  if (body.empty()) co_return std::nullopt;
  pugi::xml_document doc;
  // No DOCTYPE or entity expansion: pugixml never fetches or expands external entities.
  auto parsed = doc.load_buffer(body.data(), body.size(), pugi::parse_default & ~pugi::parse_doctype);
  pugi::xml_node root = doc.document_element();
  if (!parsed || std::string_view(root.name()) != "CreateBucketConfiguration") {
    co_return errors::malformed_xml();
  }
  std::string location = root.child("LocationConstraint").text().get();
  std::string lower = common::http::to_lower(config.auth.location);
  if (location != config.auth.location && location != lower) {
    co_return errors::invalid_location_constraint();
  }
  co_return std::nullopt;
}

net::awaitable<Response> put_bucket(Exchange& ex, S3Request& s3, const S3ApiConfig& config) {
  if (auto e = co_await check_location(ex, config)) co_return s3.error(*e);
  auto answer = co_await call_swift(s3, "PUT", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 202) {
    // The container was there already. Without S3 ACLs no other owner is recorded, so it is
    // the user's own (Swift's _bucket_put_accepted_error).
    co_return s3.error(errors::bucket_already_owned_by_you(s3.bucket));
  }
  if (r.status != 201) co_return s3.error(unexpected(s3, r));
  Response out;
  out.status = 200;
  out.headers = swift_to_s3_headers(r.headers);
  out.headers.set("Location", "/" + s3.bucket);
  out.headers.set("x-amz-id-2", s3.env.trans_id);
  out.headers.set("x-amz-request-id", s3.env.trans_id);
  out.body.clear();
  out.headers.set("Content-Length", "0");
  co_return out;
}


// ---- ListObjects (v1 and v2) ------------------------------------------------------------------

// Swift's get_validated_param(): an integer query parameter in [0, 2^31-1], capped at `limit`.
std::variant<int64_t, S3Error> validated_param(const S3Request& s3, const std::string& name,
                                               int64_t def, int64_t limit = kMax32BitInt) {
  auto it = s3.params.find(name);
  if (it == s3.params.end()) return def;
  auto v = common::parse_python_int(it->second);
  if (v && *v < 0) {
    return S3Error::invalid_argument(name, it->second,
                                     "Argument " + name + " must be an integer between 0 and " +
                                         std::to_string(kMax32BitInt));
  }
  if (!v || *v > kMax32BitInt) {
    return S3Error::invalid_argument(name, it->second,
                                     "Provided " + name + " not an integer or within integer range");
  }
  return std::min(*v, limit);
}

// A query parameter that must be UTF-8 (Swift's _validated_utf8_param).
std::variant<std::optional<std::string>, S3Error> utf8_param(const S3Request& s3,
                                                             const std::string& name) {
  auto it = s3.params.find(name);
  if (it == s3.params.end()) return std::optional<std::string>();
  if (!it->second.empty() && !common::valid_utf8(it->second)) {
    return S3Error::invalid_argument(name, common::http::quote(it->second));
  }
  return std::optional<std::string>(it->second);
}

// A listing's last_modified ("2026-12-02T01:30:15.123450") as S3 writes times: rounded up to
// the second, "2026-12-02T01:30:16.000Z".
std::string s3_time(std::string_view iso) {
  if (iso.size() < 19) return std::string(iso);
  auto num = [&](size_t pos, size_t len) {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) v = v * 10 + (iso[i] - '0');
    return v;
  };
  int64_t t = common::http::epoch_from_civil(num(0, 4), num(5, 2), num(8, 2), num(11, 2),
                                             num(14, 2), num(17, 2));
  bool fraction = false;
  for (size_t i = 20; i < iso.size(); ++i) fraction = fraction || iso[i] != '0';
  if (fraction) ++t;
  auto c = common::http::civil_from_epoch(t);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d.000Z",
                static_cast<long long>(c.year), c.month, c.day, c.hour, c.minute, c.second);
  return buf;
}

std::string base64_encode(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Python's b64decode(token, validate=True) then UTF-8: nullopt for anything else.
std::optional<std::string> base64_decode_strict(std::string_view s) {
  if (s.size() % 4 != 0) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = s[i + j];
      if (c == '=' && i + 4 == s.size() && j >= 2) {
        v[j] = 0;
        ++pad;
      } else {
        if (pad) return std::nullopt;
        v[j] = value(c);
        if (v[j] < 0) return std::nullopt;
      }
    }
    uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>(n >> 16));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xFF));
  }
  if (!common::valid_utf8(out)) return std::nullopt;
  return out;
}

std::string json_text(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (!v) return {};
  if (v->is_string()) return std::string(v->as_string());
  if (v->is_int64()) return std::to_string(v->as_int64());
  if (v->is_uint64()) return std::to_string(v->as_uint64());
  return {};
}

// The ETag a listing entry shows S3 clients (Swift's _add_object): a multipart upload's own,
// an SLO's "<etag>-N", else the quoted MD5.
std::string listing_etag(const boost::json::object& o) {
  std::string hash = json_text(o, "hash");
  // "<md5>; s3_etag=<etag>" (s3api's listing filter splits it off, as here).
  if (size_t semi = hash.find(';'); semi != std::string::npos) {
    std::string params = hash.substr(semi);
    if (size_t at = params.find("s3_etag="); at != std::string::npos) {
      std::string v = params.substr(at + 8);
      v = v.substr(0, v.find(';'));
      while (!v.empty() && v.back() == ' ') v.pop_back();
      return "\"" + v + "\"";
    }
    hash = hash.substr(0, semi);
  }
  if (o.contains("slo_etag")) {
    std::string slo = json_text(o, "slo_etag");
    std::erase(slo, '"');
    return "\"" + slo + "-N\"";
  }
  if (hash.size() >= 2 && hash.front() == '"' && hash.back() == '"') return hash;
  return "\"" + hash + "\"";
}

net::awaitable<Response> list_objects(S3Request& s3, const S3ApiConfig& config) {
  auto tag = validated_param(s3, "max-keys", config.max_bucket_listing);
  if (auto* e = std::get_if<S3Error>(&tag)) co_return s3.error(*e);
  const int64_t tag_max_keys = std::get<int64_t>(tag);
  const int64_t max_keys = std::min(tag_max_keys, config.max_bucket_listing);
  std::optional<std::string> encoding;
  if (auto it = s3.params.find("encoding-type"); it != s3.params.end()) {
    if (it->second != "url") {
      co_return s3.error(S3Error::invalid_argument("encoding-type", it->second,
                                                   "Invalid Encoding Method specified in Request"));
    }
    encoding = it->second;
  }
  const bool url = encoding.has_value();
  auto enc = [&](const std::string& v) { return url ? common::http::quote(v, "/") : v; };
  // Swift's query: one more than asked, to tell whether the listing is truncated.
  std::map<std::string, std::string> query = {{"limit", std::to_string(max_keys + 1)}};
  for (const char* name : {"prefix", "delimiter"}) {
    auto v = utf8_param(s3, name);
    if (auto* e = std::get_if<S3Error>(&v)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(v)) query[name] = *got;
  }
  int list_type = 1;
  if (auto it = s3.params.find("list-type"); it != s3.params.end()) {
    auto v = common::parse_python_int(it->second);
    if (!v) {
      co_return s3.error(S3Error::invalid_argument("list-type", it->second,
                                                   "Argument list-type must be an integer"));
    }
    list_type = *v == 2 ? 2 : 1;
  }
  bool fetch_owner = false;
  if (list_type == 2) {
    auto start_after = utf8_param(s3, "start-after");
    if (auto* e = std::get_if<S3Error>(&start_after)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(start_after)) query["marker"] = *got;
    if (auto it = s3.params.find("continuation-token"); it != s3.params.end()) {
      auto decoded = base64_decode_strict(it->second);
      if (!decoded) {
        co_return s3.error(S3Error::invalid_argument("continuation-token",
                                                     common::http::quote(it->second),
                                                     "The continuation token provided is incorrect"));
      }
      query["marker"] = *decoded;
    }
    if (auto it = s3.params.find("fetch-owner"); it != s3.params.end()) {
      fetch_owner = common::config_true_value(it->second);
    }
  } else {
    auto marker = utf8_param(s3, "marker");
    if (auto* e = std::get_if<S3Error>(&marker)) co_return s3.error(*e);
    if (auto& got = std::get<std::optional<std::string>>(marker)) query["marker"] = *got;
  }
  std::string qs = "format=json";
  for (const auto& [k, v] : query) qs += "&" + k + "=" + common::http::quote(v, "");
  auto answer = co_await call_swift(s3, "GET", s3.bucket, std::nullopt, qs, 64u << 20);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  const Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status != 200 && r.status != 204) co_return s3.error(unexpected(s3, r));
  boost::system::error_code ec;
  auto listing = boost::json::parse(r.body.empty() ? "[]" : r.body, ec);
  if (ec || !listing.is_array()) co_return s3.error(errors::internal_error());
  auto& items = listing.as_array();
  const bool truncated = max_keys > 0 && static_cast<int64_t>(items.size()) > max_keys;
  if (static_cast<int64_t>(items.size()) > max_keys) items.resize(static_cast<size_t>(max_keys));
  auto last_name = [&]() -> std::string {
    const auto& o = items.back().as_object();
    return o.contains("name") ? json_text(o, "name") : json_text(o, "subdir");
  };
  auto param = [&](const char* name) -> std::optional<std::string> {
    auto it = s3.params.find(name);
    if (it == s3.params.end()) return std::nullopt;
    return it->second;
  };

  pugi::xml_node root;
  auto doc = result_document("ListBucketResult", &root);
  add_text(root, "Name", s3.bucket);
  std::optional<std::string> prefix = param("prefix");
  add_optional(root, "Prefix", prefix ? std::optional(enc(*prefix)) : std::nullopt);
  if (list_type == 2) {
    if (truncated && !items.empty()) add_text(root, "NextContinuationToken", base64_encode(last_name()));
    if (auto token = param("continuation-token")) add_text(root, "ContinuationToken", *token);
    if (auto start_after = param("start-after")) add_text(root, "StartAfter", enc(*start_after));
    add_text(root, "KeyCount", std::to_string(items.size()));
  } else {
    std::optional<std::string> marker = param("marker");
    add_optional(root, "Marker", marker ? std::optional(enc(*marker)) : std::nullopt);
    if (truncated && s3.has("delimiter") && !items.empty()) {
      add_text(root, "NextMarker", enc(last_name()));
    }
  }
  add_text(root, "MaxKeys", std::to_string(tag_max_keys));
  if (auto delimiter = param("delimiter"); delimiter && !delimiter->empty()) {
    add_text(root, "Delimiter", enc(*delimiter));
  }
  if (url) add_text(root, "EncodingType", "url");
  add_text(root, "IsTruncated", truncated ? "true" : "false");
  for (const auto& item : items) {
    if (!item.is_object()) continue;
    const auto& o = item.as_object();
    if (o.contains("subdir")) {
      pugi::xml_node p = root.append_child("CommonPrefixes");
      add_text(p, "Prefix", enc(json_text(o, "subdir")));
      continue;
    }
    pugi::xml_node c = root.append_child("Contents");
    add_text(c, "Key", enc(json_text(o, "name")));
    add_text(c, "LastModified", s3_time(json_text(o, "last_modified")));
    add_text(c, "ETag", listing_etag(o));
    add_text(c, "Size", json_text(o, "bytes"));
    if (fetch_owner || list_type != 2) {
      pugi::xml_node owner = c.append_child("Owner");
      add_text(owner, "ID", s3.user_id());
      add_text(owner, "DisplayName", s3.user_id());
    }
    add_text(c, "StorageClass", "STANDARD");
  }
  co_return xml_response(200, to_xml(doc), s3.env.trans_id);
}

net::awaitable<Response> delete_bucket(S3Request& s3) {
  auto answer = co_await call_swift(s3, "DELETE", s3.bucket, std::nullopt);
  if (auto* e = std::get_if<S3Error>(&answer)) co_return s3.error(*e);
  Response& r = std::get<Response>(answer);
  if (r.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (r.status == 409) co_return s3.error(errors::bucket_not_empty());
  if (r.status != 204) co_return s3.error(unexpected(s3, r));
  Response out;
  out.status = 204;
  out.headers = swift_to_s3_headers(r.headers);
  out.headers.set("x-amz-id-2", s3.env.trans_id);
  out.headers.set("x-amz-request-id", s3.env.trans_id);
  co_return out;
}

class S3Api final : public Middleware {
 public:
  explicit S3Api(S3ApiConfig config) : config_(std::move(config)) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    std::string bucket_in_host = bucket_in_host_of(req);
    S3AuthRequest auth{.method = req.method,
                       .raw_path = req.path(),
                       .query = req.query(),
                       .headers = &req.headers,
                       .bucket_in_host = bucket_in_host};
    double now = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
    S3AuthOutcome outcome = parse_s3_auth(auth, config_.auth, now);
    if (!outcome.is_s3) co_return co_await next(ex, env);
    if (outcome.error) co_return co_await ex.reply(error_response(*outcome.error, env.trans_id));
    S3Request s3{.client = req, .env = env, .next = next, .bucket = {}, .key = {}, .params = {},
                 .signature = std::make_shared<S3Signature>(std::move(*outcome.signature)),
                 .acl_header_used = false};
    for (auto& [k, v] : common::http::parse_query(req.query())) s3.params[k] = std::move(v);
    std::string path = common::http::percent_decode(req.path());
    if (!common::valid_utf8(path)) {
      co_return co_await ex.reply(s3.error(errors::invalid_uri(std::string(req.path()))));
    }
    if (!bucket_in_host.empty()) {
      s3.bucket = bucket_in_host;
      if (path.size() > 1) s3.key = path.substr(1);
    } else {
      auto segs = common::http::split_path(path, 0, 2, true);
      if (!segs.ok()) co_return co_await ex.reply(s3.error(errors::internal_error()));
      s3.bucket = (*segs)[0].value_or("");
      s3.key = (*segs)[1];
      if (s3.key && s3.key->empty()) s3.key.reset();
      if (!s3.bucket.empty() && !valid_bucket_name(s3.bucket, config_.dns_compliant_bucket_names)) {
        co_return co_await ex.reply(s3.error(errors::invalid_bucket_name(s3.bucket)));
      }
    }
    co_return co_await ex.reply(co_await dispatch(ex, s3));
  }

 private:
  // The bucket a virtual-hosted-style Host names (Swift's parse_host()), or "".
  std::string bucket_in_host_of(const Request& req) const {
    if (config_.storage_domains.empty()) return {};
    std::string_view host = req.headers.get_or("Host", "");
    if (size_t colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
    for (const auto& domain : config_.storage_domains) {
      std::string d = domain.starts_with('.') ? domain : "." + domain;
      if (host.ends_with(d)) return std::string(host.substr(0, host.size() - d.size()));
    }
    return {};
  }

  // Swift's S3Request.controller and the handlers served so far.
  net::awaitable<Response> dispatch(Exchange& ex, S3Request& s3) {
    static constexpr std::string_view kUnsupported[] = {
        "notification", "policy", "publicAccessBlock", "requestPayment",
        "torrent",      "website", "cors",            "restore"};
    for (std::string_view p : kUnsupported) {
      if (s3.has(p)) co_return s3.error(errors::not_implemented("The requested resource is not implemented"));
    }
    const std::string& method = s3.client.method;
    if (s3.bucket.empty()) {
      if (method == "GET") co_return co_await list_buckets(s3, config_);
      co_return s3.error(errors::method_not_allowed(method, "SERVICE"));
    }
    static constexpr std::string_view kSubresources[] = {
        "acl",       "delete",     "location", "logging", "partNumber", "uploadId",
        "uploads",   "versioning", "tagging",  "object-lock"};
    bool subresource = false;
    for (std::string_view p : kSubresources) subresource = subresource || s3.has(p);
    if (!subresource && !s3.key) {
      if (method == "HEAD") co_return co_await head_bucket(s3);
      if (method == "GET" && !s3.has("versions")) co_return co_await list_objects(s3, config_);
      if (method == "PUT") co_return co_await put_bucket(ex, s3, config_);
      if (method == "DELETE") co_return co_await delete_bucket(s3);
    }
    co_return s3.error(errors::not_implemented());
  }

  const S3ApiConfig config_;
};

}  // namespace
}  // namespace s3api

Result<std::unique_ptr<Middleware>> make_s3api(const common::Section& section,
                                               const MiddlewareContext&) {
  s3api::S3ApiConfig c;
  c.auth.location = section.get_string("location", "us-east-1");
  APUS_ASSIGN_OR_RETURN(c.dns_compliant_bucket_names,
                        section.get_bool("dns_compliant_bucket_names", true));
  APUS_ASSIGN_OR_RETURN(c.auth.allowable_clock_skew, section.get_int("allowable_clock_skew", 900));
  if (c.auth.allowable_clock_skew <= 0) {
    return section.invalid("allowable_clock_skew", "must be a positive integer");
  }
  c.storage_domains = section.get_list("storage_domain");
  APUS_ASSIGN_OR_RETURN(c.max_bucket_listing, section.get_int("max_bucket_listing", 1000));
  if (c.max_bucket_listing <= 0) {
    return section.invalid("max_bucket_listing", "must be a positive integer");
  }
  return std::unique_ptr<Middleware>(std::make_unique<s3api::S3Api>(std::move(c)));
}

}  // namespace apus::proxy
