// Browser POST upload policies (proxy/s3api/post_policy.h): AWS's conditions, the fields
// every condition must cover, and the errors (400 for a policy that is not one, 403 for one
// that does not hold).
#include "proxy/s3api/post_policy.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <variant>

namespace {

using apus::proxy::s3api::check_post_policy;
using apus::proxy::s3api::LengthRange;
using apus::proxy::s3api::S3Error;

constexpr double kNow = 1796175015;  // 2026-12-02T01:30:15Z

const std::map<std::string, std::string> kFields = {
    {"bucket", "b"}, {"key", "foo.txt"}, {"acl", "private"}, {"content-type", "text/plain"},
    {"awsaccesskeyid", "test:tester"}, {"signature", "x"}, {"policy", "p"}};

std::string policy(const std::string& conditions,
                   const std::string& expiration = "\"2026-12-02T02:00:00Z\"") {
  return "{\"expiration\": " + expiration + ", \"conditions\": [" + conditions + "]}";
}

const std::string kCovering =
    R"({"bucket": "b"}, ["starts-with", "$key", "foo"], {"acl": "private"},)"
    R"( ["starts-with", "$Content-Type", "text/"], ["content-length-range", 0, 1024])";

std::string outcome(const std::string& text,
                    const std::map<std::string, std::string>& fields = kFields) {
  auto v = check_post_policy(text, fields, kNow);
  if (const auto* e = std::get_if<S3Error>(&v)) {
    return std::to_string(e->status) + " " + e->code + ": " + e->message;
  }
  const auto& r = std::get<LengthRange>(v);
  return "ok " + std::to_string(r.min) + "-" + std::to_string(r.max);
}

}  // namespace

TEST_CASE("post policy: conditions that hold give the size range") {
  CHECK(outcome(policy(kCovering)) == "ok 0-1024");
  // Operators and field names in any case; starts-with "" takes anything.
  CHECK(outcome(policy(R"({"bUcKeT": "b"}, ["StArTs-WiTh", "$KeY", ""], {"AcL": "private"},)"
                       R"( ["EQ", "$content-type", "text/plain"])")) ==
        "ok 0-9223372036854775807");
  // Fractions of a second in the expiration.
  CHECK(outcome(policy(kCovering, "\"2026-12-02T02:00:00.000Z\"")) == "ok 0-1024");
  // x-ignore-* fields need no condition.
  auto more = kFields;
  more["x-ignore-me"] = "1";
  CHECK(outcome(policy(kCovering), more) == "ok 0-1024");
}

TEST_CASE("post policy: what does not hold is AccessDenied") {
  CHECK(outcome(policy(kCovering, "\"2026-12-02T01:00:00Z\"")) ==
        "403 AccessDenied: Invalid according to Policy: Policy expired.");
  CHECK(outcome(policy(R"({"bucket": "other"}, ["starts-with", "$key", "foo"],)"
                       R"( {"acl": "private"}, ["starts-with", "$Content-Type", "text/"])"))
            .starts_with("403 AccessDenied: Invalid according to Policy: Policy Condition failed"));
  CHECK(outcome(policy(R"({"bucket": "b"}, ["starts-with", "$key", "bar"], {"acl": "private"},)"
                       R"( ["starts-with", "$Content-Type", "text/"])"))
            .starts_with("403 AccessDenied"));
  // A field no condition names.
  CHECK(outcome(policy(R"({"bucket": "b"}, ["starts-with", "$key", "foo"],)"
                       R"( ["starts-with", "$Content-Type", "text/"])")) ==
        "403 AccessDenied: Invalid according to Policy: Extra input fields: acl");
  // A condition on a field the form lacks.
  CHECK(outcome(policy(kCovering + R"(, ["eq", "$x-amz-meta-foo", "bar"])"))
            .starts_with("403 AccessDenied"));
}

TEST_CASE("post policy: what is not a policy is InvalidPolicyDocument") {
  CHECK(outcome("not json").starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(R"({"conditions": []})") ==
        "400 InvalidPolicyDocument: Invalid Policy: Policy missing expiration.");
  CHECK(outcome(R"({"EXPIRATION": "2026-12-02T02:00:00Z", "conditions": []})") ==
        "400 InvalidPolicyDocument: Invalid Policy: Policy missing expiration.");
  CHECK(outcome(R"({"expiration": "2026-12-02T02:00:00Z"})") ==
        "400 InvalidPolicyDocument: Invalid Policy: Policy missing conditions.");
  CHECK(outcome(R"({"expiration": "2026-12-02T02:00:00Z", "CONDITIONS": []})") ==
        "400 InvalidPolicyDocument: Invalid Policy: Policy missing conditions.");
  CHECK(outcome(policy(kCovering, "\"Wed, 02 Dec 2026 02:00:00 GMT\""))
            .starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(policy("{}")).starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(policy(R"(["content-length-range", 0])")).starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(policy(R"(["content-length-range", -1, 0])"))
            .starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(policy(R"(["matches", "$key", "f.*"])")).starts_with("400 InvalidPolicyDocument"));
  CHECK(outcome(policy(R"(["eq", "key", "foo.txt"])")).starts_with("400 InvalidPolicyDocument"));
}
