// Fuzzes the parsers of the S3 documents and headers a client sends with a request body or a
// header: Tagging documents and x-amz-tagging (tagging.h), AccessControlPolicy documents
// (s3_acl.h), CORSConfiguration documents (cors.h), browser POST policies (post_policy.h),
// bucket policies (bucket_policy.h, evaluated too), OwnershipControls (s3_acl.h), Object
// Lock's documents, dates and write headers (object_lock.h), and server-side encryption's
// bucket default and headers (sse.h).
// The first byte picks the parser; the rest is the document.
//
// Besides the sanitizers, it checks what the operations rely on: a refusal is a 400 (403 for
// a policy that does not hold) of the codes S3 gives; an accepted tag set is within S3's
// limits; every accepted document's stored form reads back to what was accepted.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proxy/s3api/bucket_policy.h"
#include "proxy/s3api/cors.h"
#include "proxy/s3api/object_lock.h"
#include "proxy/s3api/post_policy.h"
#include "proxy/s3api/s3_acl.h"
#include "proxy/s3api/sse.h"
#include "proxy/s3api/tagging.h"

namespace s3 = apus::proxy::s3api;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "s3_documents_fuzz: %s\n", what);
  std::abort();
}

void check_tags(const std::variant<s3::TagSet, s3::S3Error>& parsed, size_t max_tags) {
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if (e->status != 400 || (e->code != "MalformedXML" && e->code != "InvalidTag")) {
      fail("a refusal other than MalformedXML or InvalidTag");
    }
    return;
  }
  s3::TagSet tags = std::get<s3::TagSet>(parsed);
  if (tags.size() > max_tags) fail("more tags than S3 allows");
  for (const auto& [key, value] : tags) {
    if (key.empty()) fail("an empty key accepted");
    if (key.size() > 4 * s3::kMaxTagKeyLength || value.size() > 4 * s3::kMaxTagValueLength) {
      fail("a key or value longer than S3 allows");
    }
  }
  std::string stored = s3::encode_tags(tags);
  std::sort(tags.begin(), tags.end());
  if (s3::decode_tags(stored) != tags) fail("the stored form does not read back");
}

void check_acl(std::string_view body) {
  auto parsed = s3::parse_acl_document(body);
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if ((e->status != 400 || (e->code != "MalformedACLError" && e->code != "InvalidArgument")) &&
        e->code != "NotImplemented") {
      fail("an ACL refusal S3 does not give");
    }
    return;
  }
  const auto& acl = std::get<s3::Acl>(parsed);
  auto stored = s3::decode_acl(s3::encode_acl(acl));
  if (!stored || *stored != acl) fail("the stored ACL does not read back");
}

void check_cors(std::string_view body) {
  auto parsed = s3::parse_cors_xml(body);
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if (e->status != 400 || (e->code != "MalformedXML" && e->code != "InvalidRequest")) {
      fail("a CORS refusal S3 does not give");
    }
    return;
  }
  const auto& rules = std::get<s3::CorsRules>(parsed);
  if (rules.empty() || rules.size() > s3::kMaxCorsRules) fail("a rule count S3 refuses");
  if (s3::decode_cors(s3::encode_cors(rules)) != rules) fail("the stored rules do not read back");
}

void check_policy(std::string_view body) {
  const std::map<std::string, std::string> fields = {{"bucket", "b"}, {"key", "k"}};
  auto held = s3::check_post_policy(body, fields, 1796175015);
  if (const auto* e = std::get_if<s3::S3Error>(&held)) {
    if (!(e->status == 400 && e->code == "InvalidPolicyDocument") &&
        !(e->status == 403 && e->code == "AccessDenied")) {
      fail("a policy refusal S3 does not give");
    }
    return;
  }
  const auto& range = std::get<s3::LengthRange>(held);
  if (range.min < 0 || range.min > range.max) fail("an empty size range accepted");
}

void check_bucket_policy(std::string_view body) {
  auto parsed = s3::BucketPolicy::parse(body, "b");
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if (e->status != 400 || e->code != "MalformedPolicy") fail("a bucket policy refusal S3 does not give");
    return;
  }
  const auto& policy = std::get<s3::BucketPolicy>(parsed);
  apus::common::http::HeaderMap h;
  for (const auto& [name, value] : s3::encode_policy_sysmeta(policy.text())) {
    if (value.size() + name.size() >= 8000) fail("a stored policy header too long");
    h.set(name, value);
  }
  if (!policy.text().empty() && s3::decode_policy_sysmeta(h) != policy.text()) {
    fail("the stored policy does not read back");
  }
  s3::PolicyRequest request{.action = "s3:GetObject", .resource = "arn:aws:s3:::b/k",
                            .user = "test:tester", .value_of = [](std::string_view key) {
                              return std::optional<std::vector<std::string>>(
                                  std::vector<std::string>{std::string(key)});
                            }};
  (void)policy.evaluate(request);
  request.user.clear();
  request.value_of = {};
  (void)policy.evaluate(request);
  (void)policy.is_public();
}

void check_ownership(std::string_view body) {
  auto parsed = s3::parse_ownership_controls(body);
  if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
    if (e->status != 400 || e->code != "MalformedXML") fail("an ownership refusal S3 does not give");
    return;
  }
  auto back = s3::parse_ownership_controls(
      s3::ownership_controls_document(std::get<s3::ObjectOwnership>(parsed)));
  if (std::get_if<s3::ObjectOwnership>(&back) == nullptr ||
      std::get<s3::ObjectOwnership>(back) != std::get<s3::ObjectOwnership>(parsed)) {
    fail("the ownership document does not read back");
  }
}

// The first byte of `body` picks the Object Lock document: configuration, retention, legal
// hold, or x-amz-object-lock-* header values (the rest split at newlines).
void check_object_lock(std::string_view body) {
  constexpr double kNow = 1796175015;
  if (body.empty()) return;
  const char which = body[0];
  body.remove_prefix(1);
  auto allowed = [](const s3::S3Error& e, std::initializer_list<std::string_view> codes) {
    return e.status == 400 && std::find(codes.begin(), codes.end(), e.code) != codes.end();
  };
  switch (which % 4) {
    case 0: {
      auto parsed = s3::parse_lock_configuration(body);
      if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
        if (!allowed(*e, {"MalformedXML", "InvalidRetentionPeriod"})) fail("a lock refusal");
        return;
      }
      const auto& c = std::get<s3::LockConfiguration>(parsed);
      if (c.days < 0 || c.years < 0 || c.days > 36500 || c.years > 100) fail("a period S3 refuses");
      if (s3::decode_lock_configuration(s3::encode_lock_configuration(c)) != c) {
        fail("the stored lock configuration does not read back");
      }
      break;
    }
    case 1: {
      auto parsed = s3::parse_retention(body, kNow);
      if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
        if (!allowed(*e, {"MalformedXML", "InvalidArgument"})) fail("a retention refusal");
        return;
      }
      const auto& r = std::get<s3::Retention>(parsed);
      if (!(r.until_seconds > kNow) || s3::parse_iso8601(r.until) != r.until_seconds) {
        fail("a retention date that does not hold");
      }
      break;
    }
    case 2: {
      auto parsed = s3::parse_legal_hold(body);
      if (const auto* e = std::get_if<s3::S3Error>(&parsed); e && !allowed(*e, {"MalformedXML"})) {
        fail("a legal hold refusal");
      }
      break;
    }
    default: {
      apus::common::http::HeaderMap h;
      const char* names[] = {"x-amz-object-lock-mode", "x-amz-object-lock-retain-until-date",
                             "x-amz-object-lock-legal-hold"};
      for (const char* name : names) {
        size_t nl = body.find('\n');
        h.set(name, body.substr(0, nl));
        body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
      }
      auto lock = s3::lock_for_write(h, s3::LockConfiguration{}, kNow);
      if (const auto* e = std::get_if<s3::S3Error>(&lock);
          e && !allowed(*e, {"InvalidArgument", "InvalidRequest"})) {
        fail("a lock header refusal");
      }
      if (auto* stored = std::get_if<0>(&lock)) {
        apus::common::http::HeaderMap swift, answer;
        for (const auto& [name, value] : *stored) swift.set(name, value);
        s3::add_lock_headers(swift, answer);
        (void)s3::deletion_refused(s3::lock_state(swift), kNow, false);
      }
      break;
    }
  }
}

// The first byte of `body` picks a bucket encryption document or SSE header values (the rest
// split at newlines, one header each).
void check_sse(std::string_view body) {
  if (body.empty()) return;
  const char which = body[0];
  body.remove_prefix(1);
  if (which % 2 == 0) {
    auto parsed = s3::parse_bucket_encryption(body);
    if (const auto* e = std::get_if<s3::S3Error>(&parsed)) {
      if (e->status != 400 || (e->code != "MalformedXML" && e->code != "InvalidArgument")) {
        fail("a bucket encryption refusal");
      }
      return;
    }
    const auto& c = std::get<s3::BucketEncryption>(parsed);
    auto back = s3::decode_bucket_encryption(s3::encode_bucket_encryption(c));
    if (!back || back->kind != c.kind || back->kms_key_id != c.kms_key_id ||
        back->bucket_key != c.bucket_key) {
      fail("the stored bucket encryption does not read back");
    }
    (void)s3::bucket_encryption_document(c);
    return;
  }
  apus::common::http::HeaderMap h;
  const char* names[] = {"x-amz-server-side-encryption",
                         "x-amz-server-side-encryption-aws-kms-key-id",
                         "x-amz-server-side-encryption-customer-algorithm",
                         "x-amz-server-side-encryption-customer-key",
                         "x-amz-server-side-encryption-customer-key-MD5"};
  for (const char* name : names) {
    size_t nl = body.find('\n');
    if (!body.empty() && body[0] != '-') h.set(name, body.substr(0, nl));
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
  }
  for (const auto& result : {s3::write_sse(h, std::nullopt), s3::read_sse(h)}) {
    if (const auto* e = std::get_if<s3::S3Error>(&result)) {
      if (e->status != 400 || e->code != "InvalidArgument") fail("an SSE header refusal");
      continue;
    }
    const auto& sse = std::get<s3::Sse>(result);
    if (sse.kind == s3::SseKind::kCustomer && sse.customer_key.size() != 32) {
      fail("an SSE-C key that is not 32 bytes");
    }
    apus::common::http::HeaderMap swift, answer;
    apus::proxy::ProxyEnv env;
    s3::apply_write_sse(sse, swift, env);
    s3::add_sse_headers(swift, answer);
    if (swift.contains("x-amz-server-side-encryption-customer-key")) fail("a key stored");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 10) {
    case 9:
      check_sse(body);
      break;
    case 7:
      check_ownership(body);
      break;
    case 8:
      check_object_lock(body);
      break;
    case 6:
      check_bucket_policy(body);
      break;
    case 3:
      check_acl(body);
      break;
    case 4:
      check_cors(body);
      break;
    case 5:
      check_policy(body);
      break;
    case 0:
      check_tags(s3::parse_tagging_xml(body, s3::TagTarget::kObject), s3::kMaxObjectTags);
      break;
    case 1:
      check_tags(s3::parse_tagging_xml(body, s3::TagTarget::kBucket), s3::kMaxBucketTags);
      break;
    default:
      check_tags(s3::parse_tagging_header(body), s3::kMaxObjectTags);
      break;
  }
  return 0;
}
