// S3 Object Lock (proxy/s3api/object_lock.h): the documents a client sends, dates, and what a
// retention or legal hold refuses.
#include "proxy/s3api/object_lock.h"

#include <doctest/doctest.h>

#include <string>
#include <variant>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::decode_lock_configuration;
using apus::proxy::s3api::deletion_refused;
using apus::proxy::s3api::encode_lock_configuration;
using apus::proxy::s3api::kLegalHoldSysmeta;
using apus::proxy::s3api::kLockModeSysmeta;
using apus::proxy::s3api::kLockUntilSysmeta;
using apus::proxy::s3api::lock_configuration_document;
using apus::proxy::s3api::lock_for_write;
using apus::proxy::s3api::lock_state;
using apus::proxy::s3api::LockConfiguration;
using apus::proxy::s3api::parse_iso8601;
using apus::proxy::s3api::parse_legal_hold;
using apus::proxy::s3api::parse_lock_configuration;
using apus::proxy::s3api::parse_retention;
using apus::proxy::s3api::Retention;
using apus::proxy::s3api::retention_change_allowed;
using apus::proxy::s3api::S3Error;

constexpr double k2026 = 1796169600;  // 2026-12-02T00:00:00Z
constexpr double k2030 = 1893456000;  // 2030-01-01T00:00:00Z

std::string config(const std::string& enabled, const std::string& rule) {
  return "<ObjectLockConfiguration><ObjectLockEnabled>" + enabled + "</ObjectLockEnabled>" +
         rule + "</ObjectLockConfiguration>";
}

std::string rule(const std::string& mode, const std::string& period) {
  return "<Rule><DefaultRetention><Mode>" + mode + "</Mode>" + period +
         "</DefaultRetention></Rule>";
}

std::string code_of(const std::variant<LockConfiguration, S3Error>& v) {
  return std::holds_alternative<S3Error>(v) ? std::get<S3Error>(v).code : "";
}

}  // namespace

TEST_CASE("the bucket's configuration: Enabled, one mode, days or years") {
  auto ok = parse_lock_configuration(config("Enabled", rule("GOVERNANCE", "<Days>1</Days>")));
  REQUIRE(std::holds_alternative<LockConfiguration>(ok));
  CHECK(std::get<LockConfiguration>(ok) == LockConfiguration{.mode = "GOVERNANCE", .days = 1});
  auto bare = parse_lock_configuration(config("Enabled", ""));
  REQUIRE(std::holds_alternative<LockConfiguration>(bare));
  CHECK(std::get<LockConfiguration>(bare).mode.empty());
  CHECK(code_of(parse_lock_configuration(config("Disabled", rule("GOVERNANCE", "<Years>1</Years>")))) ==
        "MalformedXML");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("ABC", "<Days>1</Days>")))) ==
        "MalformedXML");
  CHECK(code_of(parse_lock_configuration(
            config("Enabled", rule("GOVERNANCE", "<Days>1</Days><Years>1</Years>")))) ==
        "MalformedXML");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("GOVERNANCE", "")))) ==
        "MalformedXML");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("GOVERNANCE", "<Days>0</Days>")))) ==
        "InvalidRetentionPeriod");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Years>-1</Years>")))) ==
        "InvalidRetentionPeriod");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Years>101</Years>")))) ==
        "InvalidRetentionPeriod");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Days>x</Days>")))) ==
        "MalformedXML");
  // S3's 100 years, counted in days or in years; a count too large to multiply is refused too.
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Days>36500</Days>")))) ==
        "");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Days>36501</Days>")))) ==
        "InvalidRetentionPeriod");
  CHECK(code_of(parse_lock_configuration(config("Enabled", rule("COMPLIANCE", "<Years>100</Years>")))) ==
        "");
  CHECK(code_of(parse_lock_configuration(
            config("Enabled", rule("COMPLIANCE", "<Years>999999999999999999</Years>")))) ==
        "InvalidRetentionPeriod");
  CHECK(code_of(parse_lock_configuration(
            config("Enabled", rule("COMPLIANCE", "<Years>99999999999999999999</Years>")))) ==
        "MalformedXML");
  CHECK(code_of(parse_lock_configuration("<Other/>")) == "MalformedXML");

  for (const LockConfiguration& c : {LockConfiguration{}, LockConfiguration{.mode = "COMPLIANCE", .years = 2}}) {
    CHECK(decode_lock_configuration(encode_lock_configuration(c)) == c);
    auto back = parse_lock_configuration(lock_configuration_document(c));
    REQUIRE(std::holds_alternative<LockConfiguration>(back));
    CHECK(std::get<LockConfiguration>(back) == c);
  }
  CHECK_FALSE(decode_lock_configuration("").has_value());
  CHECK_FALSE(decode_lock_configuration(R"({"Mode":"GOVERNANCE"})").has_value());
}

TEST_CASE("dates: ISO 8601 with fractions and offsets") {
  CHECK(parse_iso8601("2030-01-01T00:00:00Z") == k2030);
  CHECK(parse_iso8601("2030-01-01T00:00:00.500Z") == k2030 + 0.5);
  CHECK(parse_iso8601("2030-01-01T01:00:00+01:00") == k2030);
  CHECK(parse_iso8601("2029-12-31T23:00:00-01:00") == k2030);
  CHECK_FALSE(parse_iso8601("2030-01-01").has_value());
  CHECK_FALSE(parse_iso8601("2030-01-01T00:00:00").has_value());  // no zone
  CHECK_FALSE(parse_iso8601("2030-01-01T00:00:00Zjunk").has_value());
  CHECK_FALSE(parse_iso8601("2030-01-01T00:00:00.Z").has_value());
}

TEST_CASE("retention and legal hold documents") {
  auto r = parse_retention("<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>"
                           "2030-01-01T00:00:00Z</RetainUntilDate></Retention>", k2026);
  REQUIRE(std::holds_alternative<Retention>(r));
  CHECK(std::get<Retention>(r).until_seconds == k2030);
  auto past = parse_retention("<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>"
                              "2020-01-01T00:00:00Z</RetainUntilDate></Retention>", k2026);
  REQUIRE(std::holds_alternative<S3Error>(past));
  CHECK(std::get<S3Error>(past).code == "InvalidArgument");
  auto mode = parse_retention("<Retention><Mode>abc</Mode><RetainUntilDate>"
                              "2030-01-01T00:00:00Z</RetainUntilDate></Retention>", k2026);
  CHECK(std::get<S3Error>(mode).code == "MalformedXML");
  CHECK(std::get<bool>(parse_legal_hold("<LegalHold><Status>ON</Status></LegalHold>")));
  CHECK_FALSE(std::get<bool>(parse_legal_hold("<LegalHold><Status>OFF</Status></LegalHold>")));
  CHECK(std::get<S3Error>(parse_legal_hold("<LegalHold><Status>abc</Status></LegalHold>")).code ==
        "MalformedXML");
}

TEST_CASE("what a retention or a legal hold refuses") {
  HeaderMap h;
  h.set(kLockModeSysmeta, "GOVERNANCE");
  h.set(kLockUntilSysmeta, "2030-01-01T00:00:00Z");
  auto governance = lock_state(h);
  CHECK(deletion_refused(governance, k2026, false));
  CHECK_FALSE(deletion_refused(governance, k2026, true));
  CHECK_FALSE(deletion_refused(governance, k2030 + 1, false));  // over
  h.set(kLegalHoldSysmeta, "ON");
  CHECK(deletion_refused(lock_state(h), k2030 + 1, true));  // a hold has no bypass
  h.set(kLegalHoldSysmeta, "OFF");
  h.set(kLockModeSysmeta, "COMPLIANCE");
  auto compliance = lock_state(h);
  CHECK(deletion_refused(compliance, k2026, true));

  Retention longer{.mode = "GOVERNANCE", .until = "", .until_seconds = k2030 + 86400};
  Retention shorter{.mode = "GOVERNANCE", .until = "", .until_seconds = k2030 - 86400};
  Retention stricter{.mode = "COMPLIANCE", .until = "", .until_seconds = k2030};
  CHECK(retention_change_allowed(governance, longer, k2026, false));
  CHECK_FALSE(retention_change_allowed(governance, shorter, k2026, false));
  CHECK(retention_change_allowed(governance, shorter, k2026, true));
  CHECK_FALSE(retention_change_allowed(governance, stricter, k2026, false));
  CHECK(retention_change_allowed(governance, stricter, k2026, true));
  Retention lighter{.mode = "GOVERNANCE", .until = "", .until_seconds = k2030 + 86400};
  CHECK_FALSE(retention_change_allowed(compliance, lighter, k2026, true));
  Retention compliance_longer{.mode = "COMPLIANCE", .until = "", .until_seconds = k2030 + 1};
  CHECK(retention_change_allowed(compliance, compliance_longer, k2026, false));
  CHECK(retention_change_allowed(compliance, shorter, k2030 + 1, false));  // over: anything
}

TEST_CASE("a write's lock: its headers, or the bucket's default") {
  HeaderMap none;
  auto plain = lock_for_write(none, std::nullopt, k2026);
  CHECK(std::get<0>(plain).empty());
  LockConfiguration days{.mode = "COMPLIANCE", .days = 2};
  auto defaulted = lock_for_write(none, days, k2026);
  REQUIRE(std::get<0>(defaulted).size() == 2);
  CHECK(std::get<0>(defaulted)[0].second == "COMPLIANCE");
  CHECK(parse_iso8601(std::get<0>(defaulted)[1].second) == k2026 + 2 * 86400);

  HeaderMap asked;
  asked.set("x-amz-object-lock-mode", "GOVERNANCE");
  asked.set("x-amz-object-lock-retain-until-date", "2030-01-01T00:00:00Z");
  asked.set("x-amz-object-lock-legal-hold", "ON");
  auto explicit_lock = lock_for_write(asked, days, k2026);
  REQUIRE(std::get<0>(explicit_lock).size() == 3);
  CHECK(std::get<0>(explicit_lock)[0].second == "GOVERNANCE");
  CHECK(std::get<0>(explicit_lock)[2].second == "ON");
  CHECK(std::get<S3Error>(lock_for_write(asked, std::nullopt, k2026)).code == "InvalidRequest");

  HeaderMap half;
  half.set("x-amz-object-lock-mode", "GOVERNANCE");
  CHECK(std::get<S3Error>(lock_for_write(half, LockConfiguration{}, k2026)).code ==
        "InvalidArgument");
  HeaderMap past = asked;
  past.set("x-amz-object-lock-retain-until-date", "2020-01-01T00:00:00Z");
  CHECK(std::get<S3Error>(lock_for_write(past, LockConfiguration{}, k2026)).code ==
        "InvalidArgument");
  HeaderMap bad_hold;
  bad_hold.set("x-amz-object-lock-legal-hold", "MAYBE");
  CHECK(std::get<S3Error>(lock_for_write(bad_hold, LockConfiguration{}, k2026)).code ==
        "InvalidArgument");
}
