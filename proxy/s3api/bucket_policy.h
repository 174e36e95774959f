// Bucket policies (PutBucketPolicy, with s3_acl): the JSON policy language of S3 as AWS
// documents it, parsed and checked when it is stored, and evaluated for every request on the
// bucket. Swift's s3api has no bucket policies; this is Apus's own.
//
// What a request may do, as S3 decides it for a bucket's own account and others: an explicit
// Deny of a matching statement wins; otherwise a matching Allow lets the request in even where
// the ACLs would not; otherwise the ACLs decide (s3_acl.cpp).
//
// Principals: "*" (everyone, anonymous requests too), {"AWS": ...} with "*", an account
// ("test", or "arn:aws:iam::test:root": every user of tempauth's account "test"), a user
// ("test:tester", or "arn:aws:iam::test:user/tester"), {"CanonicalUser": "test:tester"}.
// {"Service": ...} and {"Federated": ...} name no user of Apus's and match nothing.
//
// Stored as the client sent it (GetBucketPolicy gives the same text back), base64 in up to
// four sysmeta headers X-Container-Sysmeta-S3api-Policy-0..3: a storage server's header line
// ends at 8192 bytes, and a policy may have 20 KiB.
//
// Thread-compatible values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/http/headers.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

inline constexpr size_t kMaxPolicyBytes = 20 * 1024;
inline constexpr std::string_view kPolicySysmetaPrefix = "X-Container-Sysmeta-S3api-Policy-";
inline constexpr int kPolicySysmetaChunks = 4;

enum class PolicyEffect : uint8_t { kNone, kAllow, kDeny };

// What a request is, as a policy sees it.
struct PolicyRequest {
  std::string action;    // "s3:GetObject"
  std::string resource;  // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
  std::string user;      // the S3 user ID ("test:tester"); "" when anonymous
  // The values of a condition key (lower-cased, "s3:x-amz-acl") in the request, nullopt when
  // the request has none.
  std::function<std::optional<std::vector<std::string>>(std::string_view key)> value_of;
};

class BucketPolicy {
 public:
  // A policy document for `bucket`: MalformedPolicy when it is not valid JSON, lacks a field,
  // names an unknown action, effect or condition operator, or a resource that is not the
  // bucket or its objects; too large over 20 KiB.
  static std::variant<BucketPolicy, S3Error> parse(std::string_view text, std::string_view bucket);

  // The statements' verdict on `request`: kDeny when a Deny matches, else kAllow when an Allow
  // matches, else kNone.
  PolicyEffect evaluate(const PolicyRequest& request) const;

  // S3's "public": an Allow whose principal is everyone, with no condition that pins the
  // caller down (a source IP range or ARN, an account).
  bool is_public() const;

  // Whether a condition reads a key that starts with `prefix` ("s3:existingobjecttag/"), so the
  // request's evaluation must find those values first.
  bool reads_key(std::string_view prefix) const;

  const std::string& text() const { return text_; }

  struct Condition {
    std::string op;   // the base operator, lower-cased ("stringlike")
    bool if_exists = false;
    enum class Set : uint8_t { kSingle, kForAnyValue, kForAllValues } set = Set::kSingle;
    std::string key;  // lower-cased
    std::vector<std::string> values;
  };
  struct Principal {
    bool everyone = false;
    std::vector<std::string> accounts;  // tempauth account names
    std::vector<std::string> users;     // S3 user IDs
  };
  struct Statement {
    bool allow = true;
    bool not_principal = false;
    Principal principal;
    bool not_action = false;
    std::vector<std::string> actions;  // lower-cased patterns
    bool not_resource = false;
    std::vector<std::string> resources;
    std::vector<Condition> conditions;
  };

 private:
  std::string text_;
  std::vector<Statement> statements_;
};

// The stored form: the headers that keep `text` (all four chunk headers, empty ones removing
// what an earlier, longer policy left), and the text back from a container's headers (nullopt:
// none stored, or not readable).
std::vector<std::pair<std::string, std::string>> encode_policy_sysmeta(std::string_view text);
std::optional<std::string> decode_policy_sysmeta(const common::http::HeaderMap& h);

// The policy a container's headers keep, for evaluation (null: none, or none that parses).
// Every request to a bucket with a policy needs it: the parsed policies of the last 32
// (bucket, stored form) pairs are kept per thread, at most some 20 KiB of text and its parse
// each, so a busy bucket's policy is decoded and parsed once, not per request.
std::shared_ptr<const BucketPolicy> policy_from_sysmeta(const common::http::HeaderMap& h,
                                                        std::string_view bucket);

// `text` matches `pattern`, where '*' stands for any run of characters and '?' for one
// (`fold`: ASCII case does not matter).
bool policy_wildcard_match(std::string_view pattern, std::string_view text, bool fold = false);

}  // namespace apus::proxy::s3api
