// Bucket policies (proxy/s3api/bucket_policy.h): what a stored policy must be, how statements,
// principals, wildcards and conditions decide, what counts as public, and the sysmeta form.
#include "proxy/s3api/bucket_policy.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <variant>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::BucketPolicy;
using apus::proxy::s3api::decode_policy_sysmeta;
using apus::proxy::s3api::encode_policy_sysmeta;
using apus::proxy::s3api::PolicyEffect;
using apus::proxy::s3api::PolicyRequest;
using apus::proxy::s3api::policy_from_sysmeta;
using apus::proxy::s3api::policy_wildcard_match;
using apus::proxy::s3api::S3Error;

BucketPolicy parsed(const std::string& text, const std::string& bucket = "b") {
  auto p = BucketPolicy::parse(text, bucket);
  REQUIRE(std::holds_alternative<BucketPolicy>(p));
  return std::get<BucketPolicy>(p);
}

std::string refusal(const std::string& text, const std::string& bucket = "b") {
  auto p = BucketPolicy::parse(text, bucket);
  REQUIRE(std::holds_alternative<S3Error>(p));
  CHECK(std::get<S3Error>(p).code == "MalformedPolicy");
  return std::get<S3Error>(p).message;
}

std::string one_statement(const std::string& body) {
  return R"({"Version":"2012-10-17","Statement":[{)" + body + "}]}";
}

PolicyRequest request(std::string action, std::string resource, std::string user,
                      std::map<std::string, std::string> values = {}) {
  PolicyRequest r{.action = std::move(action), .resource = std::move(resource),
                  .user = std::move(user), .value_of = {}};
  r.value_of = [values](std::string_view key) -> std::optional<std::vector<std::string>> {
    auto it = values.find(std::string(key));
    if (it == values.end()) return std::nullopt;
    return std::vector<std::string>{it->second};
  };
  return r;
}

const std::string kListForAll = one_statement(
    R"("Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:ListBucket",)"
    R"("Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"])");

}  // namespace

TEST_CASE("a policy must name its effect, principal, action and this bucket's resources") {
  parsed(kListForAll);
  CHECK(refusal("not json") == "Policies must be valid JSON and the first byte must be '{'");
  CHECK(refusal("[1]") == "Policies must be valid JSON and the first byte must be '{'");
  CHECK(refusal(R"({"Version":"2012-10-17"})") == "Missing required field Statement");
  CHECK(refusal(R"({"Version":"2011-01-01","Statement":[]})") ==
        "The policy must contain a valid version string");
  CHECK(refusal(one_statement(R"("Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*")")) ==
        "Missing required field Effect");
  CHECK(refusal(one_statement(R"("Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*")")) ==
        "Invalid effect: Maybe");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*")")) ==
        "Missing required field Principal");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Resource":"arn:aws:s3:::b/*")")) ==
        "Missing required field Action");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject")")) ==
        "Missing required field Resource");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Action":"s3:Fly","Resource":"arn:aws:s3:::b/*")")) ==
        "Policy has invalid action");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Action":"ec2:GetObject","Resource":"arn:aws:s3:::b/*")")) ==
        "Policy has invalid action");
  // Another bucket's resources are not this bucket's to grant.
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*")")) ==
        "Policy has invalid resource");
  // Wildcards that cover this bucket are fine (a policy copied from bucket to bucket).
  parsed(one_statement(R"("Effect":"Allow","Principal":"*","Action":"s3:Get*","Resource":["arn:aws:s3:::*","arn:aws:s3:::*/*"])"));
  CHECK(refusal(one_statement(R"("Effect":"Allow","NotPrincipal":{"AWS":"arn:aws:iam::t:root"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b")")) ==
        "NotPrincipal is not supported with Allow");
  CHECK(refusal(one_statement(R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringSortOf":{"aws:Referer":"x"}})")) ==
        "Invalid Condition type : StringSortOf");
  CHECK(refusal(std::string(20 * 1024 + 1, ' ')) == "Policies must be less than 20 KB");
  // Nesting deep enough to exhaust a recursive reader is refused, not followed.
  refusal(std::string(5000, '[') + std::string(5000, ']'));
}

TEST_CASE("statements decide: a Deny wins, an Allow grants, silence leaves it to the ACLs") {
  BucketPolicy p = parsed(R"({"Version":"2012-10-17","Statement":[)"
                          R"({"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*"},)"
                          R"({"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::test2:user/tester2"},)"
                          R"("Action":["s3:DeleteObject"],"Resource":"arn:aws:s3:::b/keep/*"}]})");
  CHECK(p.evaluate(request("s3:GetObject", "arn:aws:s3:::b/x", "")) == PolicyEffect::kAllow);
  CHECK(p.evaluate(request("s3:DeleteObject", "arn:aws:s3:::b/keep/x", "test2:tester2")) ==
        PolicyEffect::kDeny);
  CHECK(p.evaluate(request("s3:DeleteObject", "arn:aws:s3:::b/keep/x", "test:tester")) ==
        PolicyEffect::kAllow);
  // Actions compare without case; the bucket itself is not "b/*".
  CHECK(p.evaluate(request("S3:getobject", "arn:aws:s3:::b/x", "u:v")) == PolicyEffect::kAllow);
  CHECK(p.evaluate(request("s3:ListBucket", "arn:aws:s3:::b", "u:v")) == PolicyEffect::kNone);

  BucketPolicy accounts = parsed(one_statement(
      R"("Effect":"Allow","Principal":{"AWS":["arn:aws:iam::test:root","other:one"]},)"
      R"("Action":"s3:ListBucket","Resource":"arn:aws:s3:::b")"));
  CHECK(accounts.evaluate(request("s3:ListBucket", "arn:aws:s3:::b", "test:anyone")) ==
        PolicyEffect::kAllow);
  CHECK(accounts.evaluate(request("s3:ListBucket", "arn:aws:s3:::b", "other:one")) ==
        PolicyEffect::kAllow);
  CHECK(accounts.evaluate(request("s3:ListBucket", "arn:aws:s3:::b", "other:two")) ==
        PolicyEffect::kNone);
  CHECK(accounts.evaluate(request("s3:ListBucket", "arn:aws:s3:::b", "")) == PolicyEffect::kNone);

  BucketPolicy not_principal = parsed(one_statement(
      R"("Effect":"Deny","NotPrincipal":{"AWS":"test:tester"},"Action":"s3:*",)"
      R"("Resource":"arn:aws:s3:::b/*")"));
  CHECK(not_principal.evaluate(request("s3:GetObject", "arn:aws:s3:::b/o", "x:y")) ==
        PolicyEffect::kDeny);
  CHECK(not_principal.evaluate(request("s3:GetObject", "arn:aws:s3:::b/o", "test:tester")) ==
        PolicyEffect::kNone);
}

TEST_CASE("conditions: operators, IfExists, absent keys and Null") {
  auto with = [](const std::string& condition) {
    return parsed(one_statement(
        R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*",)"
        R"("Condition":)" + condition));
  };
  auto verdict = [](const BucketPolicy& p, std::map<std::string, std::string> values) {
    return p.evaluate(request("s3:GetObject", "arn:aws:s3:::b/o", "", std::move(values)));
  };
  BucketPolicy like = with(R"({"StringLike":{"aws:Referer":"http://www.example.com/*"}})");
  CHECK(verdict(like, {{"aws:referer", "http://www.example.com/index.html"}}) == PolicyEffect::kAllow);
  CHECK(verdict(like, {{"aws:referer", "http://example.com"}}) == PolicyEffect::kNone);
  CHECK(verdict(like, {}) == PolicyEffect::kNone);  // absent: a positive operator fails

  BucketPolicy if_exists = with(R"({"StringLikeIfExists":{"aws:Referer":"http://www.example.com/*"}})");
  CHECK(verdict(if_exists, {}) == PolicyEffect::kAllow);
  CHECK(verdict(if_exists, {{"aws:referer", "http://example.com"}}) == PolicyEffect::kNone);

  BucketPolicy not_equals = with(R"({"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}})");
  CHECK(verdict(not_equals, {}) == PolicyEffect::kAllow);  // absent: a negated operator holds
  CHECK(verdict(not_equals, {{"s3:x-amz-server-side-encryption", "AES256"}}) == PolicyEffect::kNone);
  CHECK(verdict(not_equals, {{"s3:x-amz-server-side-encryption", "aws:kms"}}) == PolicyEffect::kAllow);

  BucketPolicy null = with(R"({"Null":{"s3:x-amz-server-side-encryption":"true"}})");
  CHECK(verdict(null, {}) == PolicyEffect::kAllow);
  CHECK(verdict(null, {{"s3:x-amz-server-side-encryption", "AES256"}}) == PolicyEffect::kNone);

  BucketPolicy ip = with(R"({"IpAddress":{"aws:SourceIp":["10.0.0.0/8","::1/128"]}})");
  CHECK(verdict(ip, {{"aws:sourceip", "10.1.2.3"}}) == PolicyEffect::kAllow);
  CHECK(verdict(ip, {{"aws:sourceip", "11.1.2.3"}}) == PolicyEffect::kNone);
  CHECK(verdict(ip, {{"aws:sourceip", "::1"}}) == PolicyEffect::kAllow);

  BucketPolicy numbers = with(R"({"NumericLessThanEquals":{"s3:max-keys":10}})");
  CHECK(verdict(numbers, {{"s3:max-keys", "10"}}) == PolicyEffect::kAllow);
  CHECK(verdict(numbers, {{"s3:max-keys", "11"}}) == PolicyEffect::kNone);
  CHECK(verdict(numbers, {{"s3:max-keys", "ten"}}) == PolicyEffect::kNone);

  BucketPolicy date = with(R"({"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}})");
  CHECK(verdict(date, {{"aws:currenttime", "2026-12-02T00:00:00.000Z"}}) == PolicyEffect::kAllow);
  CHECK(verdict(date, {{"aws:currenttime", "2019-12-31T23:59:59Z"}}) == PolicyEffect::kNone);

  // Condition keys compare without case, their values with it.
  BucketPolicy tag = with(R"({"StringEquals":{"s3:ExistingObjectTag/security":"public"}})");
  CHECK(tag.reads_key("s3:existingobjecttag/"));
  CHECK(verdict(tag, {{"s3:existingobjecttag/security", "public"}}) == PolicyEffect::kAllow);
  CHECK(verdict(tag, {{"s3:existingobjecttag/security", "Public"}}) == PolicyEffect::kNone);
}

TEST_CASE("public: an Allow for everyone that no condition pins to known callers") {
  CHECK(parsed(kListForAll).is_public());
  CHECK_FALSE(parsed(one_statement(
      R"("Effect":"Allow","Principal":{"AWS":"arn:aws:iam::s3tenant1:root"},)"
      R"("Action":"s3:ListBucket","Resource":"arn:aws:s3:::b")")).is_public());
  CHECK_FALSE(parsed(one_statement(
      R"("Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",)"
      R"("Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/32"}})")).is_public());
  CHECK(parsed(one_statement(
      R"("Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b",)"
      R"("Condition":{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}})")).is_public());
  CHECK(parsed(one_statement(
      R"("Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*",)"
      R"("Condition":{"StringLike":{"aws:Referer":"http://x/*"}})")).is_public());
  CHECK_FALSE(parsed(one_statement(
      R"("Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*")")).is_public());
}

TEST_CASE("the stored form keeps the text exactly, in four headers a storage server takes") {
  std::string text = kListForAll + std::string(20 * 1024 - kListForAll.size(), ' ');
  auto headers = encode_policy_sysmeta(text);
  REQUIRE(headers.size() == 4);
  HeaderMap h;
  for (const auto& [name, value] : headers) {
    CHECK(name.starts_with("X-Container-Sysmeta-S3api-Policy-"));
    CHECK(name.size() + value.size() + 4 < 8192);
    h.set(name, value);
  }
  CHECK(decode_policy_sysmeta(h) == text);
  // A shorter policy clears what the longer one left.
  for (const auto& [name, value] : encode_policy_sysmeta("{}")) h.set(name, value);
  CHECK(decode_policy_sysmeta(h) == std::optional<std::string>("{}"));
  for (const auto& [name, value] : encode_policy_sysmeta("")) CHECK(value.empty());
  CHECK_FALSE(decode_policy_sysmeta(HeaderMap()).has_value());
}

TEST_CASE("wildcards: '*' runs over any characters, '?' one") {
  CHECK(policy_wildcard_match("arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b/c"));
  CHECK(policy_wildcard_match("a*b*c", "axxbyyc"));
  CHECK_FALSE(policy_wildcard_match("a*b*c", "axxbyy"));
  CHECK(policy_wildcard_match("a?c", "abc"));
  CHECK_FALSE(policy_wildcard_match("a?c", "ac"));
  CHECK(policy_wildcard_match("S3:GET*", "s3:getobject", true));
  CHECK_FALSE(policy_wildcard_match("S3:GET*", "s3:getobject"));
  // No backtracking blow-up on many stars.
  CHECK_FALSE(policy_wildcard_match(std::string(200, '*') + "b", std::string(5000, 'a')));
}

TEST_CASE("the policy of a container's headers is parsed once and kept per thread") {
  HeaderMap h;
  CHECK(policy_from_sysmeta(h, "b") == nullptr);
  for (const auto& [name, value] : encode_policy_sysmeta(kListForAll)) h.set(name, value);
  auto first = policy_from_sysmeta(h, "b");
  REQUIRE(first != nullptr);
  CHECK(first->text() == kListForAll);
  CHECK(policy_from_sysmeta(h, "b") == first);  // kept, not parsed again
  CHECK(policy_from_sysmeta(h, "other") == nullptr);  // its resources are not other's
  // Another stored policy is another entry; the first is still kept.
  HeaderMap h2;
  const std::string deny = one_statement(
      R"("Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*")");
  for (const auto& [name, value] : encode_policy_sysmeta(deny)) h2.set(name, value);
  auto second = policy_from_sysmeta(h2, "b");
  REQUIRE(second != nullptr);
  CHECK(second->text() == deny);
  CHECK(policy_from_sysmeta(h, "b") == first);
  // A stored form that does not decode or parse is no policy.
  HeaderMap bad;
  bad.set("X-Container-Sysmeta-S3api-Policy-0", "not base64!");
  CHECK(policy_from_sysmeta(bad, "b") == nullptr);
  // Past the 32 entries kept, the oldest is parsed again (a new object, the same policy).
  for (int i = 0; i < 40; ++i) {
    HeaderMap other;
    for (const auto& [name, value] : encode_policy_sysmeta(kListForAll)) other.set(name, value);
    (void)policy_from_sysmeta(other, "bucket" + std::to_string(i));
  }
  auto again = policy_from_sysmeta(h2, "b");
  REQUIRE(again != nullptr);
  CHECK(again != second);
  CHECK(again->text() == deny);
}
