// s3api (s3api.h): the middleware, request parsing and dispatch, and the Swift subrequests the
// operations share (s3_request.h).
#include "proxy/s3api/s3api.h"

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <span>
#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "common/config/config.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "common/utf8.h"
#include "proxy/s3api/s3_auth.h"
#include "proxy/s3api/s3_request.h"
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

// Swift's S3Request._validate_headers(): what an S3 request may not ask for, whatever the
// operation. (Content-MD5 is read by the operations that take a body.)
std::optional<S3Error> refused_header(const S3Request& s3) {
  const auto& h = s3.client.headers;
  auto make = [](int status, std::string code, std::string message) {
    return S3Error{.status = status, .code = std::move(code), .message = std::move(message),
                   .details = {}};
  };
  if (s3.client.method == "PUT") {
    // PutObject takes "If-None-Match: *" (as Swift 2.36 and AWS) and If-Match with ETags (as
    // AWS; object.cpp); other conditions on a PUT are not implemented, as in Swift.
    const bool put_object = s3.key && !h.contains("X-Amz-Copy-Source") &&
                            std::all_of(s3.params.begin(), s3.params.end(),
                                        [](const auto& p) { return p.first == "x-id"; });
    auto if_none_match = h.get("If-None-Match");
    auto if_match = h.get("If-Match");
    if (h.contains("If-Modified-Since") || h.contains("If-Unmodified-Since") ||
        (if_none_match && (!put_object || *if_none_match != "*")) ||
        (if_match && (!put_object || *if_match == "*"))) {
      return errors::not_implemented("Conditional object PUTs are not supported.");
    }
  }
  if (auto source = h.get("X-Amz-Copy-Source")) {
    // check_path_header(): "[/]bucket/key" after unquoting, both parts non-empty.
    std::string path = common::http::percent_decode(*source);
    if (!path.starts_with('/')) path.insert(0, "/");
    auto parts = common::http::split_path(path, 2, 2, true);
    if (!parts.ok() || !(*parts)[0] || !(*parts)[1]) {
      return S3Error::invalid_argument(
          "x-amz-copy-source", std::string(*source),
          "Copy Source must mention the source bucket and key: sourcebucket/sourcekey");
    }
  }
  if (auto directive = h.get("x-amz-metadata-directive");
      directive && *directive != "COPY" && *directive != "REPLACE") {
    return S3Error::invalid_argument("x-amz-metadata-directive", std::string(*directive),
                                     "Unknown metadata directive.");
  }
  if (auto cls = h.get("x-amz-storage-class"); cls && *cls != "STANDARD") {
    return make(400, "InvalidStorageClass", "The storage class you specified is not valid.");
  }
  if (h.contains("x-amz-mfa")) return errors::not_implemented("MFA Delete is not supported.");
  if (auto sse = h.get("x-amz-server-side-encryption"); sse && !s3.config.encryption) {
    // As Swift: without the encryption middleware after s3api there is none to ask for. (With
    // it, a write checks the value once access is decided: sse.h.)
    if (*sse != "aws:kms" && *sse != "AES256") {
      return S3Error::invalid_argument("x-amz-server-side-encryption", std::string(*sse),
                                       "The encryption method specified is not supported");
    }
    return errors::not_implemented("Server-side encryption is not supported.");
  }
  if (!s3.config.encryption &&
      (h.contains("x-amz-server-side-encryption-customer-algorithm") ||
       h.contains("x-amz-server-side-encryption-customer-key") ||
       h.contains("x-amz-server-side-encryption-aws-kms-key-id"))) {
    return errors::not_implemented("Server-side encryption is not supported.");
  }
  if (h.contains("x-amz-website-redirect-location")) {
    return errors::not_implemented("Website redirection is not supported.");
  }
  // aws-chunked bodies: object PUTs and UploadPart decode them (object.cpp); nothing else
  // takes them yet. (x-id is the operation's name, which AWS SDKs add to every URL.)
  const bool object_put =
      s3.client.method == "PUT" && s3.key &&
      std::all_of(s3.params.begin(), s3.params.end(), [](const auto& p) {
        return p.first == "x-id" || p.first == "partNumber" || p.first == "uploadId";
      });
  if (!object_put &&
      (h.get_or("Content-Encoding", "").find("aws-chunked") != std::string_view::npos ||
       h.get_or("x-amz-content-sha256", "").starts_with("STREAMING-") ||
       h.contains("x-amz-decoded-content-length"))) {
    return errors::not_implemented(
        "Transfering payloads in multiple chunks using aws-chunked is not supported.");
  }
  if (auto directive = h.get("x-amz-tagging-directive");
      directive && *directive != "COPY" && *directive != "REPLACE") {
    return S3Error::invalid_argument("x-amz-tagging-directive", std::string(*directive),
                                     "Unknown tagging directive.");
  }
  return std::nullopt;
}

}  // namespace

Response S3Request::error(const S3Error& e) const {
  Response r = error_response(e, env.trans_id);
  // A HEAD's error carries no document, and says so (Swift: Content-Length: 0).
  if (client.method == "HEAD") r.body.clear();
  return r;
}

const std::string& S3Request::user_id() const {
  static const std::string kAnonymous;
  return signature ? signature->access_key() : kAnonymous;
}

const std::string& S3Request::account() const {
  static const std::string kNone;
  if (!signature) return kNone;
  return signature->account().empty() ? signature->access_key() : signature->account();
}

const std::string& S3Request::requester_account() const {
  static const std::string kNone;
  return signature ? signature->account() : kNone;
}

namespace {


}  // namespace

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

void add_user_metadata(std::string_view name, std::string_view value, HeaderMap& h) {
  std::string rest = common::http::to_lower(name.substr(11));
  // S3 ignores user metadata whose name has any of these.
  if (rest.find_first_of(" \"),/;<=>?@[\\]{}") != std::string::npos) return;
  std::string swift_name = "X-Object-Meta-";
  for (char c : rest) {
    if (c == '_') {
      swift_name += "=5F";
    } else {
      swift_name.push_back(c);
    }
  }
  if (auto existing = h.get(swift_name)) {
    h.set(swift_name, std::string(*existing) + "," + std::string(value));
  } else {
    h.add(swift_name, value);
  }
}

std::variant<HeaderMap, S3Error> swift_headers(S3Request& s3) {
  HeaderMap h;
  for (const auto& [name, value] : s3.client.headers) {
    if (common::http::iequals(name, "Content-Length") ||
        common::http::iequals(name, "Transfer-Encoding") ||
        common::http::iequals(name, "Expect") || common::http::iequals(name, "x-amz-acl")) {
      continue;
    }
    if (common::http::istarts_with(name, "x-amz-meta-")) {
      if (s3.client.raw_headers.empty()) add_user_metadata(name, value, h);
      continue;
    }
    h.add(name, value);
  }
  // A name with an underscore keeps it (as "=5F"): taken from the fields as received.
  for (const auto& [name, value] : s3.client.raw_headers) {
    if (common::http::istarts_with(name, "x-amz-meta-")) add_user_metadata(name, value, h);
  }
  // Server-side encryption goes by the subrequest's env (sse.h), never as headers.
  drop_sse_headers(h);
  if (auto acl = s3.client.headers.get("x-amz-acl"); acl && !s3.acl_header_used) {
    s3.acl_header_used = true;
    if (auto e = add_acl_headers(*acl, h)) return std::move(*e);
  }
  return h;
}

std::string swift_path(const S3Request& s3, const std::string& bucket,
                       const std::optional<std::string>& key) {
  std::string_view base = bucket;
  if (base.ends_with("+segments")) base.remove_suffix(std::string_view("+segments").size());
  auto holder = s3.bucket_accounts.find(std::string(base));
  std::string path = "/v1/" + (holder != s3.bucket_accounts.end() ? holder->second : s3.account());
  if (!bucket.empty()) path += "/" + bucket;
  if (key) path += "/" + *key;
  return path;
}

Request swift_request(S3Request& s3, std::string method, const std::string& bucket,
                      const std::optional<std::string>& key, std::string_view query,
                      HeaderMap headers) {
  s3.env.backend_path = swift_path(s3, bucket, key);
  return make_subrequest(std::move(method), s3.env.backend_path, query, std::move(headers));
}

ProxyEnv swift_env(const S3Request& s3) {
  if (s3.anonymous()) {
    // s3api decided by the ACLs (check_access()); there is nobody to authenticate.
    return pre_authed_env(s3.env, "S3");
  }
  ProxyEnv env = subrequest_env(s3.env, "S3");
  env.s3_signature = s3.signature;
  env.s3_acl = s3.config.s3_acl;
  env.sse_customer_key = s3.sse_customer_key;
  env.sse_refusal = std::make_shared<std::string>();
  return env;
}

net::awaitable<SwiftAnswer> call_swift(S3Request& s3, const std::string& method,
                                       const std::string& bucket,
                                       const std::optional<std::string>& key, std::string query,
                                       size_t max_body, HeaderEdit edit, EnvEdit env_edit) {
  auto headers = swift_headers(s3);
  if (auto* e = std::get_if<S3Error>(&headers)) co_return std::move(*e);
  if (edit) edit(std::get<HeaderMap>(headers));
  Request req = swift_request(s3, method, bucket, key, query,
                              std::move(std::get<HeaderMap>(headers)));
  ProxyEnv env = swift_env(s3);
  if (env_edit) env_edit(env);
  auto answer = co_await run_subrequest(s3.next, std::move(req), std::move(env), max_body);
  if (!answer.ok()) {
    APUS_LOG_DEBUG("s3api: " + method + " subrequest failed: " + answer.status().to_string());
    co_return errors::internal_error();
  }
  co_return std::move(*answer);
}

net::awaitable<std::variant<HeaderMap, S3Error>> bucket_headers(S3Request& s3) {
  auto head = co_await call_swift(s3, "HEAD", s3.bucket, std::nullopt, "", 1 << 16,
                                  [&](HeaderMap& h) { h = own_headers(s3.client.headers); });
  if (auto* e = std::get_if<S3Error>(&head)) co_return std::move(*e);
  Response& r = std::get<Response>(head);
  if (r.status == 404) co_return errors::no_such_bucket(s3.bucket);
  if (r.status < 200 || r.status >= 300) co_return unexpected(s3, r);
  co_return std::move(r.headers);
}

const std::string& bucket_holder(const S3Request& s3) {
  auto it = s3.bucket_accounts.find(s3.bucket);
  return it != s3.bucket_accounts.end() ? it->second : s3.account();
}

net::awaitable<std::optional<S3Error>> set_bucket_sysmeta(S3Request& s3, std::string_view name,
                                                          const std::string& value) {
  co_return co_await set_bucket_sysmeta(s3, {{std::string(name), value}});
}

net::awaitable<std::optional<S3Error>> set_bucket_sysmeta(
    S3Request& s3, const std::vector<std::pair<std::string, std::string>>& headers) {
  auto post = co_await call_swift(s3, "POST", s3.bucket, std::nullopt, "", 1 << 16,
                                  [&](HeaderMap& h) {
    h = own_headers(s3.client.headers);
    for (const auto& [name, value] : headers) h.set(name, value);
  });
  if (auto* e = std::get_if<S3Error>(&post)) co_return std::move(*e);
  const Response& p = std::get<Response>(post);
  if (p.status == 404) co_return errors::no_such_bucket(s3.bucket);
  if (p.status != 204) co_return unexpected(s3, p);
  auto holder = s3.bucket_accounts.find(s3.bucket);
  co_await s3.config.info->forget_info(
      holder != s3.bucket_accounts.end() ? holder->second : s3.account(), s3.bucket, s3.env);
  co_return std::nullopt;
}

Response configuration_answer(const S3Request& s3) {
  Response out;
  out.status = s3.client.method == "PUT" ? 200 : 204;
  set_request_ids(out.headers, s3.env.trans_id);
  return out;
}

net::awaitable<std::variant<std::optional<std::string>, S3Error>> read_xml_body(
    Exchange& ex, size_t max_length) {
  const Request& req = ex.request();
  if (auto te = req.headers.get("Transfer-Encoding");
      te && common::http::to_lower(*te) != "chunked") {
    S3Error e = errors::not_implemented(
        "A header you provided implies functionality that is not implemented");
    e.details.emplace_back("Header", "Transfer-Encoding");
    co_return e;
  }
  if (!req.chunked && req.content_length.value_or(0) == 0) co_return std::optional<std::string>();
  common::http::WholeBody body = co_await common::http::read_body_at_most(ex, max_length);
  if (body.outcome == common::http::WholeBody::Outcome::kTooLarge) co_return errors::malformed_xml();
  if (body.outcome == common::http::WholeBody::Outcome::kFailed) co_return errors::internal_error();
  co_return std::optional<std::string>(std::move(body.bytes));
}

net::awaitable<std::variant<std::string, S3Error>> read_configuration(Exchange& ex,
                                                                      const S3Request& s3,
                                                                      size_t max_length) {
  auto read = co_await read_xml_body(ex, max_length);
  if (auto* e = std::get_if<S3Error>(&read)) co_return std::move(*e);
  auto& body = std::get<std::optional<std::string>>(read);
  if (!body) co_return errors::malformed_xml();
  if (auto e = content_md5_mismatch(s3, *body)) co_return std::move(*e);
  co_return std::move(*body);
}

S3Error unexpected(const S3Request& s3, const Response& r) {
  switch (r.status) {
    case 400:
      return S3Error::invalid_request(r.body);
    case 401: {
      if (s3.anonymous()) return S3Error::access_denied();
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

namespace {

class S3Api final : public Middleware {
 public:
  explicit S3Api(S3ApiConfig config) : config_(std::move(config)) {}

  // Swift's register_swift_info('s3api', ...), key for key.
  std::optional<std::pair<std::string, std::string>> info() const override {
    auto n = [](int64_t v) { return std::to_string(v); };
    return std::make_pair(
        std::string("s3api"),
        "{\"max_bucket_listing\": " + n(config_.max_bucket_listing) +
            ", \"max_parts_listing\": " + n(config_.max_parts_listing) +
            ", \"max_upload_part_num\": " + n(config_.max_upload_part_num) +
            ", \"max_multi_delete_objects\": " + n(config_.max_multi_delete_objects) +
            ", \"allow_multipart_uploads\": " +
            (config_.info_allow_multipart_uploads ? "true" : "false") + ", \"min_segment_size\": " +
            n(config_.min_segment_size) + ", \"s3_acl\": " +
            (config_.s3_acl ? "true" : "false") + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    std::string bucket_in_host = bucket_in_host_of(req);
    if (req.method == "OPTIONS" && (!bucket_in_host.empty() || !swift_api_path(req))) {
      if (co_await preflight(ex, env, next, bucket_in_host)) co_return;
    }
    S3AuthRequest auth{.method = req.method,
                       .raw_path = req.path(),
                       .query = req.query(),
                       .headers = &req.headers,
                       .raw_headers = &req.raw_headers,
                       .bucket_in_host = bucket_in_host};
    double now = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
    S3AuthOutcome outcome = parse_s3_auth(auth, config_.auth, now);
    if (!outcome.is_s3) {
      // An unsigned request is Swift's, unless it names a bucket others may use.
      S3Request s3{.client = req, .env = env, .next = next, .config = config_, .bucket = {},
                   .key = {}, .params = {}, .signature = nullptr, .acl_header_used = true};
      if (co_await anonymous_s3(s3, bucket_in_host)) co_return co_await serve(ex, s3, bucket_in_host);
      co_return co_await next(ex, env);
    }
    if (outcome.error) co_return co_await ex.reply(error_response(*outcome.error, env.trans_id));
    S3Request s3{.client = req, .env = env, .next = next, .config = config_, .bucket = {},
                 .key = {}, .params = {},
                 .signature = std::make_shared<S3Signature>(std::move(*outcome.signature)),
                 // With S3 ACLs x-amz-acl is an ACL of S3's, never a container ACL.
                 .acl_header_used = config_.s3_acl};
    co_return co_await serve(ex, s3, bucket_in_host);
  }

 private:
  // An S3 request, signed or anonymous.
  net::awaitable<void> serve(Exchange& ex, S3Request& s3, const std::string& bucket_in_host) {
    const Request& req = ex.request();
    for (auto& [k, v] : common::http::parse_query(req.query())) s3.params[k] = std::move(v);
    std::string path = common::http::percent_decode(req.path());
    if (!common::valid_utf8(path)) {
      co_return co_await ex.reply(s3.error(errors::invalid_uri(std::string(req.path()))));
    }
    if (auto e = locate(s3, path, bucket_in_host)) co_return co_await ex.reply(s3.error(*e));
    // A cross-origin request (Origin) gets its bucket's CORS headers, on errors too.
    if (auto origin = req.headers.get("Origin"); origin && !origin->empty() && !s3.bucket.empty()) {
      if (s3.anonymous() || !(co_await authenticate(s3))) co_await resolve_bucket(s3, s3.bucket);
      CorsRules rules = co_await bucket_cors_rules(s3);
      std::string method(req.headers.get_or("Access-Control-Request-Method", req.method));
      if (const CorsRule* rule = matching_cors_rule(rules, *origin, method, {})) {
        CorsRule matched = *rule;
        std::string allowed(*origin);
        HeaderEditor cors(ex, [matched, allowed](int, HeaderMap& h) {
          add_cors_headers(matched, allowed, {}, h);
        });
        co_return co_await answer(cors, s3);
      }
    }
    co_return co_await answer(ex, s3);
  }

  // Answers a parsed request.
  net::awaitable<void> answer(Exchange& ex, S3Request& s3) {
    const Request& req = ex.request();
    if (auto refused = refused_header(s3)) co_return co_await ex.reply(s3.error(*refused));
    if (req.method == "GET" || req.method == "HEAD") {
      // A read's SSE-C key goes with every subrequest, the access checks' HEADs too.
      auto key = customer_key(req.headers);
      if (auto* e = std::get_if<S3Error>(&key)) co_return co_await ex.reply(s3.error(*e));
      if (auto& k = std::get<std::optional<Sse>>(key)) s3.sse_customer_key = k->customer_key;
    }
    if (auto denied = co_await decide_access(s3)) co_return co_await ex.reply(s3.error(*denied));
    // A browser upload: an unsigned POST of a form to a bucket (its fields sign it).
    if (req.method == "POST" && s3.anonymous() && !s3.key && s3.params.empty() &&
        common::http::istarts_with(req.headers.get_or("Content-Type", ""),
                                   "multipart/form-data")) {
      co_return co_await post_object(ex, s3);
    }
    // GetObject and HeadObject of a part (?partNumber without an upload) are object requests.
    const bool part_read = (req.method == "GET" || req.method == "HEAD") &&
                           s3.has("partNumber") && !s3.has("uploadId");
    if (s3.key && !s3.has("acl") && !s3.has("tagging") && !s3.has("uploads") &&
        !s3.has("uploadId") && (!s3.has("partNumber") || part_read) && !s3.has("object-lock") &&
        !s3.has("delete") && !s3.has("location") && !s3.has("logging") &&
        !s3.has("versioning") && !s3.has("cors") && !s3.has("attributes") &&
        !s3.has("publicAccessBlock") && !s3.has("policy") && !s3.has("policyStatus") &&
        !s3.has("ownershipControls") && !s3.has("retention") && !s3.has("legal-hold") &&
        !s3.has("encryption") && !unsupported(s3)) {
      co_return co_await object_request(ex, s3);
    }
    const bool multipart = s3.has("partNumber") || s3.has("uploadId") || s3.has("uploads");
    if (multipart && !s3.bucket.empty()) {
      if (!config_.allow_multipart_uploads) {
        co_return co_await ex.reply(
            s3.error(errors::not_implemented("Multi-part feature isn't support")));
      }
      // Swift's order of sub-resources: these four come first.
      if (!s3.has("acl") && !s3.has("delete") && !s3.has("location") && !s3.has("logging")) {
        if (s3.has("partNumber")) co_return co_await part_request(ex, s3);
        if (s3.has("uploadId")) co_return co_await upload_request(ex, s3);
        co_return co_await uploads_request(ex, s3);
      }
    }
    co_return co_await ex.reply(co_await dispatch(ex, s3));
  }

  // The bucket and key the request's `path` (decoded) names, path-style or with the bucket in
  // the Host: nullopt, or the error (InvalidBucketName).
  std::optional<S3Error> locate(S3Request& s3, const std::string& path,
                                const std::string& bucket_in_host) const {
    if (!bucket_in_host.empty()) {
      s3.bucket = bucket_in_host;
      if (path.size() > 1) s3.key = path.substr(1);
      return std::nullopt;
    }
    auto segs = common::http::split_path(path, 0, 2, true);
    if (!segs.ok()) return errors::internal_error();
    s3.bucket = (*segs)[0].value_or("");
    s3.key = (*segs)[1];
    if (s3.key && s3.key->empty()) s3.key.reset();
    if (!s3.bucket.empty() && !valid_bucket_name(s3.bucket, config_.dns_compliant_bucket_names)) {
      return errors::invalid_bucket_name(s3.bucket);
    }
    return std::nullopt;
  }

  // The first segment of the request's path ("v1" of "/v1/AUTH_test"), decoded.
  static std::string first_segment(const Request& req) {
    std::string path = common::http::percent_decode(req.path());
    size_t end = path.find('/', 1);
    return path.substr(1, end == std::string::npos ? std::string::npos : end - 1);
  }

  // Whether `req`'s path is one of Swift's API or of the proxy itself (/v1/..., /auth, /info).
  static bool swift_api_path(const Request& req) {
    const std::string first = first_segment(req);
    static constexpr std::string_view kSwiftPaths[] = {
        "v1", "v1.0", "auth", "info", "endpoints", "healthcheck", "crossdomain.xml"};
    for (std::string_view p : kSwiftPaths) {
      if (first == p) return true;
    }
    return false;
  }

  // A CORS preflight (OPTIONS) of an S3 path, which is never signed: with
  // cors_preflight_allow_origin, one that looks like S3's (asks for Authorization, or has a
  // presigned query) is answered from that list, as Swift's s3api does; else, with the global
  // bucket namespace, from the bucket's CORS rules. Whether it was answered (else it is
  // Swift's).
  net::awaitable<bool> preflight(Exchange& ex, ProxyEnv& env, const Next& next,
                                 const std::string& bucket_in_host) {
    const Request& req = ex.request();
    const auto& allow = config_.cors_preflight_allow_origin;
    std::string_view origin = req.headers.get_or("Origin", "");
    if (!allow.empty() && !origin.empty()) {
      std::string asked = common::http::to_lower(req.headers.get_or("Access-Control-Request-Headers", ""));
      std::string query(req.query());
      if (asked.find("authorization") != std::string::npos ||
          query.find("AWSAccessKeyId=") != std::string::npos ||
          query.find("X-Amz-Credential=") != std::string::npos) {
        Response out;
        out.headers.set("Allow", "GET, HEAD, PUT, POST, DELETE, OPTIONS");
        if (allow != std::vector<std::string>{"*"} &&
            std::find(allow.begin(), allow.end(), origin) == allow.end()) {
          out.status = 401;
        } else {
          out.status = 200;
          out.headers.set("Access-Control-Allow-Origin", origin);
          out.headers.set("Access-Control-Allow-Methods", "GET, HEAD, PUT, POST, DELETE, OPTIONS");
          out.headers.set("Vary", "Origin, Access-Control-Request-Headers");
          std::vector<std::string> headers;
          for (const auto& h : common::list_from_csv(asked)) {
            if (std::find(headers.begin(), headers.end(), h) == headers.end()) headers.push_back(h);
          }
          std::string joined;
          for (const auto& h : headers) joined += (joined.empty() ? "" : ", ") + h;
          if (!joined.empty()) out.headers.set("Access-Control-Allow-Headers", joined);
        }
        out.headers.set("Content-Length", "0");
        co_await ex.reply(std::move(out));
        co_return true;
      }
    }
    if (!config_.global_bucket_namespace) co_return false;
    S3Request s3{.client = req, .env = env, .next = next, .config = config_, .bucket = {},
                 .key = {}, .params = {}, .signature = nullptr, .acl_header_used = true};
    if (locate(s3, common::http::percent_decode(req.path()), bucket_in_host) ||
        !valid_bucket_name(s3.bucket, config_.dns_compliant_bucket_names)) {
      co_return false;  // not a bucket's: Swift's
    }
    if (!co_await resolve_bucket(s3, s3.bucket)) {
      co_await ex.reply(s3.error(errors::no_such_bucket(s3.bucket)));
      co_return true;
    }
    co_await ex.reply(co_await cors_preflight(s3));
    co_return true;
  }

  // Whether an unsigned request is an anonymous S3 request (s3_acl with the global bucket
  // namespace): one without a Swift token whose path is not Swift's API's (/v1/..., /auth,
  // /info...) and names a bucket (in its Host, or as the path's first segment) or is "/".
  // Swift's s3api has no anonymous requests: it passes every unsigned one on to Swift, whose
  // proxy refuses such paths anyway.
  net::awaitable<bool> anonymous_s3(S3Request& s3, const std::string& bucket_in_host) {
    if (!config_.s3_acl || !config_.global_bucket_namespace) co_return false;
    const Request& req = s3.client;
    if (req.headers.contains("X-Auth-Token") || req.headers.contains("X-Storage-Token")) {
      co_return false;
    }
    std::string bucket = bucket_in_host;
    // "/": an anonymous ListBuckets (which S3 denies).
    if (bucket.empty() && req.path() == "/") co_return true;
    if (bucket.empty()) {
      if (swift_api_path(req)) co_return false;
      bucket = first_segment(req);
      if (!valid_bucket_name(bucket, config_.dns_compliant_bucket_names)) co_return false;
    }
    co_return true;
  }

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

  // Who asks and where the bucket is, before anything is done for the request: with s3_acl
  // or the global bucket namespace the requester is authenticated first, the bucket found in
  // the registry, and the ACLs checked. nullopt, or the error to answer.
  net::awaitable<std::optional<S3Error>> decide_access(S3Request& s3) {
    if (!config_.s3_acl && !config_.global_bucket_namespace) co_return std::nullopt;
    if (auto e = co_await authenticate(s3)) co_return e;
    co_await resolve_bucket(s3, s3.bucket);
    co_return co_await check_access(s3);
  }

  // Sub-resources s3api does not serve at all (Swift's UnsupportedController).
  bool unsupported(const S3Request& s3) const {
    static constexpr std::string_view kUnsupported[] = {
        "notification", "requestPayment", "torrent", "website", "restore"};
    for (std::string_view p : kUnsupported) {
      if (s3.has(p)) return true;
    }
    // Bucket policies are evaluated with S3's permission model, s3_acl's.
    return !config_.s3_acl &&
           (s3.has("policy") || s3.has("policyStatus") || s3.has("ownershipControls"));
  }

  // Swift's S3Request.controller and the handlers served so far (objects: object_request();
  // multipart uploads: call()).
  net::awaitable<Response> dispatch(Exchange& ex, S3Request& s3) {
    if (unsupported(s3)) {
      co_return s3.error(errors::not_implemented("The requested resource is not implemented"));
    }
    const std::string& method = s3.client.method;
    if (s3.bucket.empty()) {
      if (method == "GET") co_return co_await list_buckets(s3);
      co_return s3.error(errors::method_not_allowed(method, "SERVICE"));
    }
    // Swift's order of sub-resources.
    if (s3.has("acl")) {
      co_return co_await (config_.s3_acl ? s3_acl_request(ex, s3) : acl_request(ex, s3));
    }
    if (s3.has("delete")) {
      if (method != "POST") {
        co_return s3.error(errors::method_not_allowed(method, "MULTI_OBJECT_DELETE"));
      }
      co_return co_await delete_objects(ex, s3);
    }
    if (s3.has("location")) {
      // A key with ?location is a bucket operation (Swift's bucket_operation drops the key).
      s3.key.reset();
      co_return co_await bucket_location(s3);
    }
    if (s3.has("logging")) co_return co_await bucket_logging(s3);
    if (s3.has("tagging")) co_return co_await tagging_request(ex, s3);
    if (s3.has("attributes") && s3.key) co_return co_await object_attributes(s3);
    if (s3.has("publicAccessBlock")) {
      if (!config_.s3_acl) co_return s3.error(errors::not_implemented());
      s3.key.reset();  // a bucket's configuration
      co_return co_await public_access_block_request(ex, s3);
    }
    if (s3.has("cors")) {
      s3.key.reset();  // a bucket's configuration
      co_return co_await cors_request(ex, s3);
    }
    if (s3.has("object-lock") && !s3.key) co_return co_await object_lock_request(ex, s3);
    if (s3.key && s3.has("retention")) co_return co_await retention_request(ex, s3);
    if (s3.key && s3.has("legal-hold")) co_return co_await legal_hold_request(ex, s3);
    if (s3.has("ownershipControls")) {
      s3.key.reset();  // a bucket's configuration
      co_return co_await ownership_controls_request(ex, s3);
    }
    if (s3.has("policy") || s3.has("policyStatus")) {
      s3.key.reset();  // a bucket's configuration
      co_return co_await (s3.has("policy") ? bucket_policy_request(ex, s3)
                                           : bucket_policy_status(s3));
    }
    if (s3.has("versioning")) {
      co_return co_await bucket_versioning(ex, s3, co_await has_object_versioning(s3));
    }
    if (s3.has("encryption")) {
      if (!config_.encryption) co_return s3.error(errors::not_implemented());
      s3.key.reset();  // a bucket's configuration
      co_return co_await bucket_encryption_request(ex, s3);
    }
    static constexpr std::string_view kSubresources[] = {
        "acl",       "delete",     "location", "logging", "partNumber", "uploadId",
        "uploads",   "versioning", "tagging",  "object-lock"};
    bool subresource = false;
    for (std::string_view p : kSubresources) subresource = subresource || s3.has(p);
    if (!subresource && !s3.key) {
      if (method == "HEAD") co_return co_await head_bucket(s3);
      if (method == "GET") {
        const bool versioning = s3.has("versions") && co_await has_object_versioning(s3);
        co_return co_await list_objects(s3, versioning);
      }
      if (method == "PUT") {
        // Object Lock keeps versions: object versioning must be in the pipeline.
        if (common::http::iequals(
                s3.client.headers.get_or("x-amz-bucket-object-lock-enabled", ""), "true") &&
            !co_await has_object_versioning(s3)) {
          co_return s3.error(errors::not_implemented("Object Lock needs object versioning"));
        }
        co_return co_await put_bucket(ex, s3);
      }
      if (method == "DELETE") co_return co_await delete_bucket(s3);
      // Swift's BucketController: POST is S3NotImplemented, other methods are not its own.
      if (method != "POST") co_return s3.error(errors::method_not_allowed(method, "BUCKET"));
    }
    co_return s3.error(errors::not_implemented());
  }

  // Whether the pipeline serves object versioning (Swift: 'object_versioning' in swift info),
  // found out from /info at the first need and remembered.
  net::awaitable<bool> has_object_versioning(S3Request& s3) {
    int known = object_versioning_.load();
    if (known >= 0) co_return known == 1;
    ProxyEnv env = subrequest_env(s3.env, "S3");
    auto answer = co_await run_subrequest(s3.next, make_subrequest("GET", "/info", "", HeaderMap()),
                                          std::move(env), 1u << 20);
    if (!answer.ok() || answer->status != 200) co_return false;  // ask again next time
    boost::system::error_code ec;
    auto info = boost::json::parse(answer->body, ec);
    bool present = !ec && info.is_object() && info.as_object().contains("object_versioning");
    object_versioning_.store(present ? 1 : 0);
    co_return present;
  }

  const S3ApiConfig config_;
  std::atomic<int> object_versioning_{-1};  // -1: not known yet
};

}  // namespace
}  // namespace s3api

Result<std::unique_ptr<Middleware>> make_s3api(const common::Section& section,
                                               const MiddlewareContext& context) {
  s3api::S3ApiConfig c;
  c.max_object_name_length = context.swift.constraints.max_object_name_length;
  c.auth.location = section.get_string("location", "us-east-1");
  APUS_ASSIGN_OR_RETURN(c.dns_compliant_bucket_names,
                        section.get_bool("dns_compliant_bucket_names", true));
  APUS_ASSIGN_OR_RETURN(c.auth.allowable_clock_skew, section.get_int("allowable_clock_skew", 900));
  if (c.auth.allowable_clock_skew <= 0) {
    return section.invalid("allowable_clock_skew", "must be a positive integer");
  }
  c.storage_domains = section.get_list("storage_domain");
  APUS_ASSIGN_OR_RETURN(c.max_bucket_listing, section.get_int("max_bucket_listing", 1000));
  APUS_ASSIGN_OR_RETURN(c.max_multi_delete_objects,
                        section.get_int("max_multi_delete_objects", 1000));
  APUS_ASSIGN_OR_RETURN(c.multi_delete_concurrency,
                        section.get_int("multi_delete_concurrency", 2));
  if (c.multi_delete_concurrency <= 0) {
    return section.invalid("multi_delete_concurrency", "must be a positive integer");
  }
  c.multi_delete_concurrency = std::min<int64_t>(c.multi_delete_concurrency, 1000);
  APUS_ASSIGN_OR_RETURN(c.allow_multipart_uploads,
                        section.get_bool("allow_multipart_uploads", true));
  c.info_allow_multipart_uploads = c.allow_multipart_uploads;
  // Multipart uploads are SLOs: without slo after s3api they are refused (Swift's
  // check_pipeline), though /info still shows the option as set.
  const std::vector<std::string>& p = context.pipeline;  // empty: no pipeline (unit tests)
  const bool slo_follows =
      std::find(std::find(p.begin(), p.end(), "s3api"), p.end(), "slo") != p.end();
  if (c.allow_multipart_uploads && !p.empty() && !slo_follows) {
    APUS_LOG_WARNING("s3api middleware requires SLO middleware to support multi-part upload, "
                     "please add it in pipeline");
    c.allow_multipart_uploads = false;
  }
  // Server-side encryption: keymaster and encryption after s3api.
  auto self = std::find(p.begin(), p.end(), "s3api");
  auto encryption = std::find(self, p.end(), "encryption");
  c.encryption = encryption != p.end() && std::find(self, encryption, "keymaster") != encryption;
  APUS_ASSIGN_OR_RETURN(c.max_parts_listing, section.get_int("max_parts_listing", 1000));
  APUS_ASSIGN_OR_RETURN(c.max_upload_part_num, section.get_int("max_upload_part_num", 1000));
  APUS_ASSIGN_OR_RETURN(c.min_segment_size, section.get_int("min_segment_size", 5242880));
  APUS_ASSIGN_OR_RETURN(c.s3_acl, section.get_bool("s3_acl", false));
  APUS_ASSIGN_OR_RETURN(c.allow_no_owner, section.get_bool("allow_no_owner", false));
  APUS_ASSIGN_OR_RETURN(c.check_bucket_owner, section.get_bool("check_bucket_owner", false));
  APUS_ASSIGN_OR_RETURN(c.global_bucket_namespace,
                        section.get_bool("global_bucket_namespace", false));
  c.bucket_registry_account =
      section.get_string("bucket_registry_account",
                         context.swift.constraints.auto_create_account_prefix + "s3api_buckets");
  if (c.bucket_registry_account.empty() || c.bucket_registry_account.find('/') != std::string::npos) {
    return section.invalid("bucket_registry_account", "must be an account name");
  }
  c.cors_preflight_allow_origin = section.get_list("cors_preflight_allow_origin");
  if (c.cors_preflight_allow_origin.size() > 1 &&
      std::find(c.cors_preflight_allow_origin.begin(), c.cors_preflight_allow_origin.end(), "*") !=
          c.cors_preflight_allow_origin.end()) {
    return section.invalid("cors_preflight_allow_origin",
                           "if it should include all domains, * must be the only entry");
  }
  c.info = &context.info;
  if (c.max_multi_delete_objects <= 0) {
    return section.invalid("max_multi_delete_objects", "must be a positive integer");
  }
  if (c.max_bucket_listing <= 0) {
    return section.invalid("max_bucket_listing", "must be a positive integer");
  }
  return std::unique_ptr<Middleware>(std::make_unique<s3api::S3Api>(std::move(c)));
}

}  // namespace apus::proxy
