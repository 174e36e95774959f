// S3 server-side encryption's headers and bucket default (proxy/s3api/sse.h): S3's refusals,
// what a write asks for, what is kept and answered, and the stored bucket default.
#include "proxy/s3api/sse.h"

#include <doctest/doctest.h>

#include <string>
#include <variant>

namespace {

namespace s3 = apus::proxy::s3api;
using apus::common::http::HeaderMap;

// The suite's SSE-C key and its MD5 (ceph's s3-tests use the same).
constexpr const char* kKey = "pO3upElrwuEXSoFwCfnZPdSsmt/xWeFa0N9KgDijwVs=";
constexpr const char* kKeyMd5 = "DWygnHRtgiJ77HCm+1rvHw==";

HeaderMap customer(const char* algorithm, const char* key, const char* md5) {
  HeaderMap h;
  if (algorithm) h.set("x-amz-server-side-encryption-customer-algorithm", algorithm);
  if (key) h.set("x-amz-server-side-encryption-customer-key", key);
  if (md5) h.set("x-amz-server-side-encryption-customer-key-MD5", md5);
  return h;
}

HeaderMap kms_header() {
  HeaderMap h;
  h.set("x-amz-server-side-encryption", "aws:kms");
  return h;
}

std::string refusal(const std::variant<s3::Sse, s3::S3Error>& r) {
  const auto* e = std::get_if<s3::S3Error>(&r);
  return e ? std::to_string(e->status) + " " + e->code : "";
}

TEST_CASE("sse: an SSE-C key is taken only whole and right") {
  auto ok = s3::write_sse(customer("AES256", kKey, kKeyMd5), std::nullopt);
  REQUIRE(std::holds_alternative<s3::Sse>(ok));
  CHECK(std::get<s3::Sse>(ok).kind == s3::SseKind::kCustomer);
  CHECK(std::get<s3::Sse>(ok).customer_key.size() == 32);
  CHECK(refusal(s3::write_sse(customer("AES256", nullptr, nullptr), std::nullopt)) ==
        "400 InvalidArgument");
  CHECK(refusal(s3::write_sse(customer(nullptr, kKey, kKeyMd5), std::nullopt)) ==
        "400 InvalidArgument");
  CHECK(refusal(s3::write_sse(customer("AES256", kKey, nullptr), std::nullopt)) ==
        "400 InvalidArgument");
  CHECK(refusal(s3::write_sse(customer("AES256", kKey, "AAAAAAAAAAAAAAAAAAAAAA=="),
                              std::nullopt)) == "400 InvalidArgument");
  CHECK(refusal(s3::write_sse(customer("AES128", kKey, kKeyMd5), std::nullopt)) ==
        "400 InvalidArgument");
  CHECK(refusal(s3::write_sse(customer("AES256", "c2hvcnQ=", "xxxx"), std::nullopt)) ==
        "400 InvalidArgument");
  HeaderMap both = customer("AES256", kKey, kKeyMd5);
  both.set("x-amz-server-side-encryption", "aws:kms");
  CHECK(refusal(s3::write_sse(both, std::nullopt)) == "400 InvalidArgument");
}

TEST_CASE("sse: a write's kind comes from its headers, else the bucket's default") {
  HeaderMap kms;
  kms.set("x-amz-server-side-encryption", "aws:kms");
  kms.set("x-amz-server-side-encryption-aws-kms-key-id", "testkey-1");
  auto k = s3::write_sse(kms, std::nullopt);
  REQUIRE(std::holds_alternative<s3::Sse>(k));
  CHECK(std::get<s3::Sse>(k).kms_key_id == "testkey-1");
  HeaderMap no_id;
  no_id.set("x-amz-server-side-encryption", "aws:kms");
  CHECK(refusal(s3::write_sse(no_id, std::nullopt)) == "400 InvalidArgument");
  s3::BucketEncryption kms_default{s3::SseKind::kKms, "testkey-2", false};
  auto from_default = s3::write_sse(no_id, kms_default);
  REQUIRE(std::holds_alternative<s3::Sse>(from_default));
  CHECK(std::get<s3::Sse>(from_default).kms_key_id == "testkey-2");
  HeaderMap id_only;
  id_only.set("x-amz-server-side-encryption-aws-kms-key-id", "testkey-1");
  CHECK(refusal(s3::write_sse(id_only, std::nullopt)) == "400 InvalidArgument");
  HeaderMap bad;
  bad.set("x-amz-server-side-encryption", "aes:kms");
  CHECK(refusal(s3::write_sse(bad, std::nullopt)) == "400 InvalidArgument");
  auto plain = s3::write_sse(HeaderMap(), s3::BucketEncryption{});
  REQUIRE(std::holds_alternative<s3::Sse>(plain));
  CHECK(std::get<s3::Sse>(plain).kind == s3::SseKind::kS3);
  CHECK(std::get<s3::Sse>(s3::write_sse(HeaderMap(), std::nullopt)).kind == s3::SseKind::kNone);
}

TEST_CASE("sse: reads take an SSE-C key and refuse the write headers") {
  CHECK(refusal(s3::read_sse(kms_header())) == "400 InvalidArgument");
  auto c = s3::read_sse(customer("AES256", kKey, kKeyMd5));
  REQUIRE(std::holds_alternative<s3::Sse>(c));
  // A stored SSE-C object: no key, another key, the right one.
  HeaderMap stored;
  stored.set(s3::kSseCustomerMd5Sysmeta, kKeyMd5);
  CHECK(s3::read_sse_refusal(stored, s3::Sse{}, "")->code == "InvalidRequest");
  s3::Sse other = std::get<s3::Sse>(c);
  other.customer_key_md5 = "arxBvwY2V4SiOne6yppVPQ==";
  CHECK(s3::read_sse_refusal(stored, other, "")->code == "InvalidRequest");
  CHECK(!s3::read_sse_refusal(stored, std::get<s3::Sse>(c), ""));
  // A key for an object stored without one.
  CHECK(s3::read_sse_refusal(HeaderMap(), std::get<s3::Sse>(c), "")->code == "InvalidRequest");
  CHECK(!s3::read_sse_refusal(HeaderMap(), s3::Sse{}, ""));
  // The encryption middleware's word counts where the sysmeta is not shown (an SLO's segment).
  CHECK(s3::read_sse_refusal(HeaderMap(), s3::Sse{}, "missing")->code == "InvalidRequest");
}

TEST_CASE("sse: what a write keeps, and what is answered") {
  auto c = std::get<s3::Sse>(s3::write_sse(customer("AES256", kKey, kKeyMd5), std::nullopt));
  HeaderMap swift = customer("AES256", kKey, kKeyMd5);
  apus::proxy::ProxyEnv env;
  s3::apply_write_sse(c, swift, env);
  CHECK(!swift.contains("x-amz-server-side-encryption-customer-key"));
  CHECK(swift.get_or(s3::kSseCustomerMd5Sysmeta, "") == kKeyMd5);
  CHECK(env.sse_write_customer_key == c.customer_key);
  HeaderMap answer;
  s3::add_sse_headers(swift, answer);
  CHECK(answer.get_or("x-amz-server-side-encryption-customer-algorithm", "") == "AES256");
  CHECK(answer.get_or("x-amz-server-side-encryption-customer-key-MD5", "") == kKeyMd5);
  s3::Sse kms{s3::SseKind::kKms, "testkey-1", "", ""};
  HeaderMap k;
  apus::proxy::ProxyEnv kenv;
  s3::apply_write_sse(kms, k, kenv);
  CHECK(kenv.sse_write_kms_key_id == "testkey-1");
  HeaderMap kanswer;
  s3::add_sse_headers(k, kanswer);
  CHECK(kanswer.get_or("x-amz-server-side-encryption", "") == "aws:kms");
  CHECK(kanswer.get_or("x-amz-server-side-encryption-aws-kms-key-id", "") == "testkey-1");
}

TEST_CASE("sse: the bucket default's document and stored form") {
  auto parsed = s3::parse_bucket_encryption(
      "<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>"
      "<SSEAlgorithm>aws:kms</SSEAlgorithm><KMSMasterKeyID>testkey-1</KMSMasterKeyID>"
      "</ApplyServerSideEncryptionByDefault><BucketKeyEnabled>true</BucketKeyEnabled></Rule>"
      "</ServerSideEncryptionConfiguration>");
  REQUIRE(std::holds_alternative<s3::BucketEncryption>(parsed));
  const auto& e = std::get<s3::BucketEncryption>(parsed);
  CHECK(e.kind == s3::SseKind::kKms);
  CHECK(e.kms_key_id == "testkey-1");
  CHECK(e.bucket_key);
  auto back = s3::decode_bucket_encryption(s3::encode_bucket_encryption(e));
  REQUIRE(back);
  CHECK(back->kms_key_id == "testkey-1");
  CHECK(s3::bucket_encryption_document(e).find("<KMSMasterKeyID>testkey-1</KMSMasterKeyID>") !=
        std::string::npos);
  auto refused = [](std::string_view xml) {
    auto r = s3::parse_bucket_encryption(xml);
    return std::holds_alternative<s3::S3Error>(r);
  };
  CHECK(refused("<ServerSideEncryptionConfiguration/>"));
  CHECK(refused("<Other/>"));
  CHECK(refused("<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>"
                "<SSEAlgorithm>DES</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule>"
                "</ServerSideEncryptionConfiguration>"));
  CHECK(refused("<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>"
                "<SSEAlgorithm>AES256</SSEAlgorithm><KMSMasterKeyID>k</KMSMasterKeyID>"
                "</ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>"));
  CHECK(!s3::decode_bucket_encryption(""));
}

}  // namespace
