// Browser-based uploads (S3's POST Object): the policy a form carries, checked against the
// form's fields as AWS documents it. The upload itself is in post_object.cpp.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

// The file's size a policy allows (content-length-range).
struct LengthRange {
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Checks the policy (its JSON text, decoded from the form's base64) at `now` (Unix seconds)
// against `fields`: the form's fields by lower-case name, the bucket's name under "bucket",
// the file's field excluded. Every condition must hold ({"field": "value"}, ["eq", "$field",
// "value"], ["starts-with", "$field", "prefix"], ["content-length-range", min, max]; field
// names and operators in any case) and every field but AWSAccessKeyId, signature,
// x-amz-signature, policy, x-ignore-* and x-amz-checksum-* must have one. A policy that is not one is
// InvalidPolicyDocument (400); an expired one, a failed condition or a field without one is
// AccessDenied (403). The file's allowed size, when it holds.
std::variant<LengthRange, S3Error> check_post_policy(
    std::string_view policy_json, const std::map<std::string, std::string>& fields, double now);

}  // namespace apus::proxy::s3api
