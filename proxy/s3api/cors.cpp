// S3 bucket CORS (cors.h): the configuration's forms, rule matching, and the ?cors operations
// and the preflight (s3_request.h).
#include "proxy/s3api/cors.h"

#include <boost/json.hpp>
#include <pugixml.hpp>

#include <algorithm>
#include <array>
#include <cctype>

#include "common/http/headers.h"
#include "common/utf8.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

namespace {

S3Error invalid_request(std::string message) { return S3Error::invalid_request(std::move(message)); }

size_t stars(std::string_view s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '*')); }

// `value` against `pattern` with at most one '*' (any run of characters, the empty one too).
bool wildcard_match(std::string_view pattern, std::string_view value, bool fold_case) {
  auto eq = [&](std::string_view a, std::string_view b) {
    return fold_case ? common::http::iequals(a, b) : a == b;
  };
  size_t star = pattern.find('*');
  if (star == std::string_view::npos) return eq(pattern, value);
  std::string_view head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return value.size() >= head.size() + tail.size() && eq(value.substr(0, head.size()), head) &&
         eq(value.substr(value.size() - tail.size()), tail);
}

std::vector<std::string> texts(pugi::xml_node rule, const char* name) {
  std::vector<std::string> out;
  for (pugi::xml_node n : rule.children(name)) out.emplace_back(n.text().get());
  return out;
}

boost::json::array json_list(const std::vector<std::string>& v) {
  boost::json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

std::vector<std::string> list_of(const boost::json::object& o, const char* key) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (!v || !v->is_array()) return out;
  for (const auto& item : v->as_array()) {
    if (item.is_string()) out.emplace_back(item.as_string());
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::variant<CorsRules, S3Error> parse_cors_xml(std::string_view body) {
  // S3's documents are UTF-8 (pugixml does not check; the stored JSON must be).
  if (!common::valid_utf8(body)) return errors::malformed_xml();
  pugi::xml_document doc;
  // pugixml neither fetches nor expands external entities.
  if (!doc.load_buffer(body.data(), body.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "CORSConfiguration") return errors::malformed_xml();
  CorsRules rules;
  for (pugi::xml_node r : root.children("CORSRule")) {
    if (rules.size() == kMaxCorsRules) return errors::malformed_xml();
    CorsRule rule{.id = r.child("ID").text().get(), .origins = texts(r, "AllowedOrigin"),
                  .methods = texts(r, "AllowedMethod"), .headers = texts(r, "AllowedHeader"),
                  .expose = texts(r, "ExposeHeader"), .max_age = std::nullopt};
    if (rule.origins.empty() || rule.methods.empty()) return errors::malformed_xml();
    for (const auto& m : rule.methods) {
      static constexpr std::array<std::string_view, 5> kMethods = {"GET", "PUT", "POST",
                                                                   "DELETE", "HEAD"};
      if (std::find(kMethods.begin(), kMethods.end(), m) == kMethods.end()) {
        return invalid_request("Found unsupported HTTP method in CORS config. Unsupported method is " + m);
      }
    }
    for (const auto& o : rule.origins) {
      if (stars(o) > 1) {
        return invalid_request("AllowedOrigin \"" + o + "\" can not have more than one wildcard.");
      }
    }
    for (const auto& h : rule.headers) {
      if (stars(h) > 1) {
        return invalid_request("AllowedHeader \"" + h + "\" can not have more than one wildcard.");
      }
    }
    if (pugi::xml_node age = r.child("MaxAgeSeconds")) {
      std::string_view text = age.text().get();
      int64_t v = 0;
      if (text.empty() || text.size() > 10) return errors::malformed_xml();
      for (char c : text) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return errors::malformed_xml();
        v = v * 10 + (c - '0');
      }
      rule.max_age = v;
    }
    rules.push_back(std::move(rule));
  }
  if (rules.empty()) return errors::malformed_xml();
  return rules;
}

std::string cors_document(const CorsRules& rules) {
  pugi::xml_node root;
  auto doc = result_document("CORSConfiguration", &root);
  for (const CorsRule& rule : rules) {
    pugi::xml_node r = root.append_child("CORSRule");
    if (!rule.id.empty()) add_text(r, "ID", rule.id);
    for (const auto& h : rule.headers) add_text(r, "AllowedHeader", h);
    for (const auto& m : rule.methods) add_text(r, "AllowedMethod", m);
    for (const auto& o : rule.origins) add_text(r, "AllowedOrigin", o);
    for (const auto& e : rule.expose) add_text(r, "ExposeHeader", e);
    if (rule.max_age) add_text(r, "MaxAgeSeconds", std::to_string(*rule.max_age));
  }
  return to_xml(doc);
}

std::string encode_cors(const CorsRules& rules) {
  boost::json::array out;
  for (const CorsRule& rule : rules) {
    boost::json::object r;
    if (!rule.id.empty()) r["id"] = rule.id;
    r["origins"] = json_list(rule.origins);
    r["methods"] = json_list(rule.methods);
    if (!rule.headers.empty()) r["headers"] = json_list(rule.headers);
    if (!rule.expose.empty()) r["expose"] = json_list(rule.expose);
    if (rule.max_age) r["max_age"] = *rule.max_age;
    out.push_back(std::move(r));
  }
  return boost::json::serialize(out);
}

CorsRules decode_cors(std::string_view stored) {
  CorsRules rules;
  if (stored.empty()) return rules;
  boost::system::error_code ec;
  auto v = boost::json::parse(stored, ec);
  if (ec || !v.is_array()) return rules;
  for (const auto& item : v.as_array()) {
    if (!item.is_object()) return {};
    const auto& o = item.as_object();
    CorsRule rule{.id = {}, .origins = list_of(o, "origins"), .methods = list_of(o, "methods"),
                  .headers = list_of(o, "headers"), .expose = list_of(o, "expose"),
                  .max_age = std::nullopt};
    if (const auto* id = o.if_contains("id"); id && id->is_string()) rule.id = id->as_string();
    if (const auto* age = o.if_contains("max_age"); age && age->is_int64()) {
      rule.max_age = age->as_int64();
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

const CorsRule* matching_cors_rule(const CorsRules& rules, std::string_view origin,
                                   std::string_view method,
                                   const std::vector<std::string>& request_headers) {
  for (const CorsRule& rule : rules) {
    bool origin_ok = std::any_of(rule.origins.begin(), rule.origins.end(), [&](const auto& o) {
      return wildcard_match(o, origin, false);
    });
    bool method_ok = std::find(rule.methods.begin(), rule.methods.end(), method) !=
                     rule.methods.end();
    bool headers_ok = std::all_of(request_headers.begin(), request_headers.end(),
                                  [&](const std::string& h) {
      return std::any_of(rule.headers.begin(), rule.headers.end(),
                         [&](const auto& allowed) { return wildcard_match(allowed, h, true); });
    });
    if (origin_ok && method_ok && headers_ok) return &rule;
  }
  return nullptr;
}

void add_cors_headers(const CorsRule& rule, std::string_view origin,
                      const std::vector<std::string>& allow_headers, common::http::HeaderMap& h) {
  const bool any_origin =
      std::find(rule.origins.begin(), rule.origins.end(), "*") != rule.origins.end();
  h.set("Access-Control-Allow-Origin", any_origin ? std::string_view("*") : origin);
  h.set("Access-Control-Allow-Methods", join(rule.methods));
  if (!allow_headers.empty()) h.set("Access-Control-Allow-Headers", join(allow_headers));
  if (!rule.expose.empty()) h.set("Access-Control-Expose-Headers", join(rule.expose));
  if (rule.max_age) h.set("Access-Control-Max-Age", std::to_string(*rule.max_age));
  if (!any_origin) h.set("Access-Control-Allow-Credentials", "true");
  h.set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");
}

// ---- the operations ---------------------------------------------------------------------------

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

namespace {

// The account that holds s3's bucket.
S3Error access_forbidden(const S3Request& s3, std::string message, std::string_view method) {
  return {.status = 403, .code = "AccessForbidden", .message = std::move(message),
          .details = {{"Method", std::string(method)},
                      {"ResourceType", s3.key ? "OBJECT" : "BUCKET"}}};
}

}  // namespace

net::awaitable<CorsRules> bucket_cors_rules(S3Request& s3) {
  if (s3.bucket.empty() || bucket_holder(s3).empty()) co_return CorsRules{};
  CachedInfo info = co_await s3.config.info->container_info(bucket_holder(s3), s3.bucket,
                                                            s3.client, s3.env);
  if (info.status < 200 || info.status >= 300) co_return CorsRules{};
  co_return decode_cors(info.headers.get_or(kCorsSysmeta, ""));
}

net::awaitable<Response> cors_preflight(S3Request& s3) {
  const auto& h = s3.client.headers;
  auto origin = h.get("Origin");
  if (!origin || origin->empty()) {
    co_return s3.error({.status = 400, .code = "BadRequest",
                        .message = "Insufficient information. Origin request header needed.",
                        .details = {}});
  }
  auto method = h.get("Access-Control-Request-Method");
  if (!method || method->empty()) {
    co_return s3.error({.status = 400, .code = "BadRequest",
                        .message = "Invalid Access-Control-Request-Method: null", .details = {}});
  }
  CachedInfo info = co_await s3.config.info->container_info(bucket_holder(s3), s3.bucket,
                                                            s3.client, s3.env);
  if (info.status == 404) co_return s3.error(errors::no_such_bucket(s3.bucket));
  if (info.status < 200 || info.status >= 300) co_return s3.error(errors::service_unavailable());
  CorsRules rules = decode_cors(info.headers.get_or(kCorsSysmeta, ""));
  if (rules.empty()) {
    co_return s3.error(access_forbidden(s3, "CORSResponse: CORS is not enabled for this bucket.",
                                        *method));
  }
  std::vector<std::string> asked;
  for (const auto& name : common::list_from_csv(h.get_or("Access-Control-Request-Headers", ""))) {
    asked.push_back(common::http::to_lower(name));
  }
  const CorsRule* rule = matching_cors_rule(rules, *origin, *method, asked);
  if (!rule) {
    co_return s3.error(access_forbidden(
        s3,
        "CORSResponse: This CORS request is not allowed. This is usually because the evalution "
        "of Origin, request method / Access-Control-Request-Method or "
        "Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
        *method));
  }
  Response out;
  out.status = 200;
  add_cors_headers(*rule, *origin, asked, out.headers);
  set_request_ids(out.headers, s3.env.trans_id);
  out.headers.set("Content-Length", "0");
  co_return out;
}

net::awaitable<Response> cors_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto headers = co_await bucket_headers(s3);
    if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
    CorsRules rules = decode_cors(std::get<HeaderMap>(headers).get_or(kCorsSysmeta, ""));
    if (rules.empty()) {
      co_return s3.error({.status = 404, .code = "NoSuchCORSConfiguration",
                          .message = "The CORS configuration does not exist",
                          .details = {{"BucketName", s3.bucket}}});
    }
    co_return xml_response(200, cors_document(rules), s3.env.trans_id);
  }
  std::string stored;  // DELETE: none
  if (method == "PUT") {
    // 100 rules of long origins and headers fit in S3's 64 KiB.
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto rules = parse_cors_xml(std::get<std::string>(body));
    if (auto* e = std::get_if<S3Error>(&rules)) co_return s3.error(*e);
    stored = encode_cors(std::get<CorsRules>(rules));
    if (stored.size() > kMaxStoredCorsBytes) {
      co_return s3.error(S3Error::invalid_request(
          "The CORS configuration is too large: Apus keeps at most " +
          std::to_string(kMaxStoredCorsBytes) + " bytes of rules per bucket."));
    }
  } else if (method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "CORS"));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, kCorsSysmeta, stored)) co_return s3.error(*e);
  co_return configuration_answer(s3);
}

}  // namespace apus::proxy::s3api
