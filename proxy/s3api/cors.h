// S3 bucket CORS (PutBucketCors, GetBucketCors, DeleteBucketCors) and its use: the preflight
// OPTIONS a browser sends before a cross-origin request, and the Access-Control-* headers of
// the actual request's answer, as AWS documents them. Swift's s3api has no bucket CORS (its
// newest versions answer every S3-looking preflight from cors_preflight_allow_origin, which
// Apus serves too, cors.cpp).
//
// A bucket's rules are kept in X-Container-Sysmeta-S3api-Cors as compact JSON, at most
// kMaxStoredCorsBytes (one header line to the container servers).
//
// Pure functions here; cors.cpp also has the operations (s3_request.h). Thread-compatible
// values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/http/headers.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

inline constexpr std::string_view kCorsSysmeta = "X-Container-Sysmeta-S3api-Cors";
inline constexpr size_t kMaxStoredCorsBytes = 8000;
inline constexpr size_t kMaxCorsRules = 100;  // S3's

struct CorsRule {
  std::string id;
  std::vector<std::string> origins;  // each with at most one '*'
  std::vector<std::string> methods;  // GET PUT POST DELETE HEAD
  std::vector<std::string> headers;  // allowed request headers, at most one '*' each
  std::vector<std::string> expose;   // response headers a browser may show
  std::optional<int64_t> max_age;    // seconds a preflight answer may be cached
  bool operator==(const CorsRule&) const = default;
};
using CorsRules = std::vector<CorsRule>;

// A CORSConfiguration document: MalformedXML when it is not one (no rule, a rule without an
// origin or a method, more than kMaxCorsRules), InvalidRequest for a method S3 does not take
// or an origin or header with more than one wildcard.
std::variant<CorsRules, S3Error> parse_cors_xml(std::string_view body);
// GetBucketCors's document.
std::string cors_document(const CorsRules& rules);
// The stored form and back (an empty or unreadable value: no rules).
std::string encode_cors(const CorsRules& rules);
CorsRules decode_cors(std::string_view stored);

// The first rule that allows `origin` to use `method` with `request_headers` (lower-case
// names), or null. Origins match case-sensitively, headers not; a '*' stands for any run of
// characters.
const CorsRule* matching_cors_rule(const CorsRules& rules, std::string_view origin,
                                   std::string_view method,
                                   const std::vector<std::string>& request_headers);

// The Access-Control-* headers of an answer to `origin` under `rule`: the origin allowed (the
// rule's "*" stays "*"), its methods, exposed headers and max age, credentials allowed unless
// the origin is "*", and Vary. `allow_headers` (a preflight's requested headers) is echoed
// when not empty.
void add_cors_headers(const CorsRule& rule, std::string_view origin,
                      const std::vector<std::string>& allow_headers,
                      common::http::HeaderMap& h);

}  // namespace apus::proxy::s3api
