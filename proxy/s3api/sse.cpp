// S3 server-side encryption (sse.h): its headers, what is kept, and the bucket default.
#include "proxy/s3api/sse.h"

#include <pugixml.hpp>

#include "common/crypto/base64.h"
#include "common/crypto/md5.h"
#include "proxy/s3api/s3_request.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Response;

namespace {

constexpr std::string_view kSse = "x-amz-server-side-encryption";
constexpr std::string_view kKmsKeyId = "x-amz-server-side-encryption-aws-kms-key-id";

std::string md5_base64(std::string_view data) {
  auto digest = common::crypto::md5(data);
  return common::crypto::b64encode(
      std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

}  // namespace

std::variant<std::optional<Sse>, S3Error> customer_key(const HeaderMap& h, bool copy_source) {
  const std::string prefix = copy_source ? "x-amz-copy-source-server-side-encryption-customer-"
                                         : "x-amz-server-side-encryption-customer-";
  auto algorithm = h.get(prefix + "algorithm");
  auto key = h.get(prefix + "key");
  auto md5 = h.get(prefix + "key-MD5");
  if (!algorithm && !key && !md5) return std::optional<Sse>();
  if (!algorithm || *algorithm != "AES256") {
    return S3Error::invalid_argument(
        prefix + "algorithm", std::string(algorithm.value_or("")),
        "Requests specifying Server Side Encryption with Customer provided keys must provide a "
        "valid encryption algorithm.");
  }
  if (!key || key->empty()) {
    return S3Error::invalid_argument(
        prefix + "key", "",
        "Requests specifying Server Side Encryption with Customer provided keys must provide an "
        "appropriate secret key.");
  }
  auto raw = common::crypto::strict_b64decode(*key);
  if (!raw || raw->size() != 32) {
    return S3Error::invalid_argument(prefix + "key", "",
                                     "The secret key was invalid for the specified algorithm.");
  }
  if (!md5 || md5->empty()) {
    return S3Error::invalid_argument(
        prefix + "key-MD5", "",
        "Requests specifying Server Side Encryption with Customer provided keys must provide the "
        "client calculated MD5 of the secret key.");
  }
  if (*md5 != md5_base64(*raw)) {
    return S3Error::invalid_argument(
        prefix + "key-MD5", std::string(*md5),
        "The calculated MD5 hash of the key did not match the hash that was provided.");
  }
  Sse sse;
  sse.kind = SseKind::kCustomer;
  sse.customer_key = std::move(*raw);
  sse.customer_key_md5 = std::string(*md5);
  return std::optional<Sse>(std::move(sse));
}

std::variant<Sse, S3Error> write_sse(const HeaderMap& client,
                                     const std::optional<BucketEncryption>& bucket_default) {
  auto customer = customer_key(client);
  if (auto* e = std::get_if<S3Error>(&customer)) return std::move(*e);
  auto& c = std::get<std::optional<Sse>>(customer);
  auto sse = client.get(kSse);
  auto kms_key = client.get(kKmsKeyId);
  if (sse && *sse != "AES256" && *sse != "aws:kms") {
    return S3Error::invalid_argument(std::string(kSse), std::string(*sse),
                                     "The encryption method specified is not supported");
  }
  if (c) {
    if (sse || kms_key) {
      return S3Error::invalid_argument(
          std::string(kSse), std::string(sse.value_or("")),
          "Server Side Encryption with Customer provided key is incompatible with the "
          "encryption method specified");
    }
    return std::move(*c);
  }
  if (kms_key && (!sse || *sse != "aws:kms")) {
    return S3Error::invalid_argument(
        std::string(kKmsKeyId), std::string(*kms_key),
        "Server Side Encryption with AWS KMS managed key requires HTTP header "
        "x-amz-server-side-encryption : aws:kms");
  }
  Sse out;
  if (sse) {
    out.kind = *sse == "AES256" ? SseKind::kS3 : SseKind::kKms;
    if (kms_key) out.kms_key_id = std::string(*kms_key);
  } else if (bucket_default) {
    out.kind = bucket_default->kind;
    out.kms_key_id = bucket_default->kms_key_id;
  }
  if (out.kind == SseKind::kKms && out.kms_key_id.empty()) {
    if (bucket_default && bucket_default->kind == SseKind::kKms) {
      out.kms_key_id = bucket_default->kms_key_id;
    }
    if (out.kms_key_id.empty()) {
      // S3 would take its own aws/s3 key; Apus has no default key to take.
      return S3Error::invalid_argument(std::string(kKmsKeyId), "",
                                       "Server Side Encryption with AWS KMS managed key needs a "
                                       "key id: this server has no default key");
    }
  }
  return out;
}

std::variant<Sse, S3Error> read_sse(const HeaderMap& client) {
  for (std::string_view name : {kSse, kKmsKeyId}) {
    if (auto v = client.get(name)) {
      return S3Error::invalid_argument(std::string(name), std::string(*v),
                                       std::string(name) +
                                           " header is not supported for this operation.");
    }
  }
  auto customer = customer_key(client);
  if (auto* e = std::get_if<S3Error>(&customer)) return std::move(*e);
  auto& c = std::get<std::optional<Sse>>(customer);
  return c ? std::move(*c) : Sse{};
}

void drop_sse_headers(HeaderMap& swift) {
  for (const char* name :
       {"x-amz-server-side-encryption", "x-amz-server-side-encryption-aws-kms-key-id",
        "x-amz-server-side-encryption-customer-algorithm",
        "x-amz-server-side-encryption-customer-key",
        "x-amz-server-side-encryption-customer-key-MD5",
        "x-amz-server-side-encryption-bucket-key-enabled",
        "x-amz-server-side-encryption-context",
        "x-amz-copy-source-server-side-encryption-customer-algorithm",
        "x-amz-copy-source-server-side-encryption-customer-key",
        "x-amz-copy-source-server-side-encryption-customer-key-MD5"}) {
    swift.erase(name);
  }
}

void apply_read_sse(const Sse& sse, HeaderMap& swift, ProxyEnv& env) {
  drop_sse_headers(swift);
  if (sse.kind == SseKind::kCustomer) env.sse_customer_key = sse.customer_key;
}

void apply_write_sse(const Sse& sse, HeaderMap& swift, ProxyEnv& env) {
  for (std::string_view name : {kSseSysmeta, kSseKmsKeySysmeta, kSseCustomerMd5Sysmeta}) {
    swift.erase(name);
  }
  drop_sse_headers(swift);
  switch (sse.kind) {
    case SseKind::kNone:
      break;
    case SseKind::kS3:
      swift.set(kSseSysmeta, "AES256");
      break;
    case SseKind::kKms:
      swift.set(kSseSysmeta, "aws:kms");
      swift.set(kSseKmsKeySysmeta, sse.kms_key_id);
      env.sse_write_kms_key_id = sse.kms_key_id;
      break;
    case SseKind::kCustomer:
      swift.set(kSseCustomerMd5Sysmeta, sse.customer_key_md5);
      env.sse_write_customer_key = sse.customer_key;
      break;
  }
}

Sse stored_sse(const HeaderMap& swift) {
  Sse sse;
  std::string_view kind = swift.get_or(kSseSysmeta, "");
  if (auto md5 = swift.get(kSseCustomerMd5Sysmeta); md5 && !md5->empty()) {
    sse.kind = SseKind::kCustomer;
    sse.customer_key_md5 = std::string(*md5);
  } else if (kind == "AES256") {
    sse.kind = SseKind::kS3;
  } else if (kind == "aws:kms") {
    sse.kind = SseKind::kKms;
    sse.kms_key_id = std::string(swift.get_or(kSseKmsKeySysmeta, ""));
  }
  return sse;
}

void add_sse_headers(const Sse& sse, HeaderMap& s3) {
  switch (sse.kind) {
    case SseKind::kNone:
      break;
    case SseKind::kS3:
      s3.set(kSse, "AES256");
      break;
    case SseKind::kKms:
      s3.set(kSse, "aws:kms");
      if (!sse.kms_key_id.empty()) s3.set(kKmsKeyId, sse.kms_key_id);
      break;
    case SseKind::kCustomer:
      s3.set("x-amz-server-side-encryption-customer-algorithm", "AES256");
      s3.set("x-amz-server-side-encryption-customer-key-MD5", sse.customer_key_md5);
      break;
  }
}

void add_sse_headers(const HeaderMap& swift, HeaderMap& s3) {
  add_sse_headers(stored_sse(swift), s3);
}

std::optional<S3Error> read_sse_refusal(const HeaderMap& swift, const Sse& read,
                                        const std::string& refusal) {
  const Sse stored = stored_sse(swift);
  const bool needs_key = stored.kind == SseKind::kCustomer || refusal == "missing" ||
                         refusal == "mismatch";
  if (needs_key && read.kind != SseKind::kCustomer) {
    return S3Error::invalid_request(
        "The object was stored using a form of Server Side Encryption. The correct parameters "
        "must be provided to retrieve the object.");
  }
  if (refusal == "mismatch" ||
      (stored.kind == SseKind::kCustomer && stored.customer_key_md5 != read.customer_key_md5)) {
    return S3Error::invalid_request(
        "The provided encryption parameters did not match the ones used originally.");
  }
  if (!needs_key && read.kind == SseKind::kCustomer) {
    return S3Error::invalid_request("The encryption parameters are not applicable to this object.");
  }
  return std::nullopt;
}

std::optional<S3Error> read_sse_refusal(const Response& answer, const Sse& read) {
  if (answer.status == 400) {
    return read_sse_refusal(answer.headers, read,
                            read.kind == SseKind::kCustomer ? "mismatch" : "missing");
  }
  if (answer.status < 200 || answer.status >= 300) return std::nullopt;
  return read_sse_refusal(answer.headers, read, "");
}

std::optional<S3Error> write_sse_refusal(const std::string& refusal) {
  if (refusal != "kms-key") return std::nullopt;
  return S3Error::invalid_argument(std::string(kKmsKeyId), "",
                                   "Invalid keyId: no such KMS key");
}

std::variant<BucketEncryption, S3Error> parse_bucket_encryption(std::string_view xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return errors::malformed_xml();
  pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "ServerSideEncryptionConfiguration") {
    return errors::malformed_xml();
  }
  size_t rules = 0;
  BucketEncryption out;
  for (pugi::xml_node rule : root.children("Rule")) {
    ++rules;
    pugi::xml_node by_default = rule.child("ApplyServerSideEncryptionByDefault");
    if (!by_default) return errors::malformed_xml();
    std::string_view algorithm = by_default.child("SSEAlgorithm").text().get();
    if (algorithm == "AES256") {
      out.kind = SseKind::kS3;
    } else if (algorithm == "aws:kms") {
      out.kind = SseKind::kKms;
    } else {
      return errors::malformed_xml();
    }
    out.kms_key_id = by_default.child("KMSMasterKeyID").text().get();
    if (out.kind == SseKind::kS3 && !out.kms_key_id.empty()) {
      return S3Error::invalid_argument(
          "ApplyServerSideEncryptionByDefault", "",
          "a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms");
    }
    out.bucket_key = std::string_view(rule.child("BucketKeyEnabled").text().get()) == "true";
  }
  if (rules != 1) return errors::malformed_xml();
  return out;
}

std::string bucket_encryption_document(const BucketEncryption& e) {
  pugi::xml_node root;
  pugi::xml_document doc = result_document("ServerSideEncryptionConfiguration", &root);
  pugi::xml_node rule = root.append_child("Rule");
  pugi::xml_node by_default = rule.append_child("ApplyServerSideEncryptionByDefault");
  add_text(by_default, "SSEAlgorithm", e.kind == SseKind::kKms ? "aws:kms" : "AES256");
  if (!e.kms_key_id.empty()) add_text(by_default, "KMSMasterKeyID", e.kms_key_id);
  add_text(rule, "BucketKeyEnabled", e.bucket_key ? "true" : "false");
  return to_xml(doc);
}

std::string encode_bucket_encryption(const BucketEncryption& e) {
  std::string out = e.kind == SseKind::kKms ? "aws:kms" : "AES256";
  out += e.bucket_key ? " bucket-key" : " -";
  if (!e.kms_key_id.empty()) out += " " + e.kms_key_id;
  return out;
}

std::optional<BucketEncryption> decode_bucket_encryption(std::string_view stored) {
  // "<algorithm> <bucket-key or ->[ <key id>]"
  size_t space = stored.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  BucketEncryption e;
  std::string_view algorithm = stored.substr(0, space);
  if (algorithm == "aws:kms") {
    e.kind = SseKind::kKms;
  } else if (algorithm != "AES256") {
    return std::nullopt;
  }
  std::string_view rest = stored.substr(space + 1);
  size_t next = rest.find(' ');
  e.bucket_key = rest.substr(0, next) == "bucket-key";
  if (next != std::string_view::npos) e.kms_key_id = std::string(rest.substr(next + 1));
  return e;
}

net::awaitable<std::variant<Sse, S3Error>> write_encryption(S3Request& s3) {
  co_return co_await write_encryption(s3, s3.client.headers);
}

net::awaitable<std::variant<Sse, S3Error>> write_encryption(S3Request& s3, const HeaderMap& h) {
  std::optional<BucketEncryption> bucket_default;
  const bool named = h.contains("x-amz-server-side-encryption") ||
                     h.contains("x-amz-server-side-encryption-customer-algorithm");
  if (s3.config.encryption && !named) {
    CachedInfo info = co_await bucket_info(s3);
    if (info.status >= 200 && info.status < 300) {
      bucket_default = decode_bucket_encryption(info.headers.get_or(kBucketEncryptionSysmeta, ""));
    }
  }
  co_return write_sse(h, bucket_default);
}

net::awaitable<Response> bucket_encryption_request(Exchange& ex, S3Request& s3) {
  const std::string& method = s3.client.method;
  if (method == "GET") {
    auto headers = co_await bucket_headers(s3);
    if (auto* e = std::get_if<S3Error>(&headers)) co_return s3.error(*e);
    auto stored =
        decode_bucket_encryption(std::get<HeaderMap>(headers).get_or(kBucketEncryptionSysmeta, ""));
    if (!stored) {
      co_return s3.error({.status = 404,
                          .code = "ServerSideEncryptionConfigurationNotFoundError",
                          .message = "The server side encryption configuration was not found",
                          .details = {{"BucketName", s3.bucket}}});
    }
    co_return xml_response(200, bucket_encryption_document(*stored), s3.env.trans_id);
  }
  std::string stored;  // DELETE: none
  if (method == "PUT") {
    auto body = co_await read_configuration(ex, s3, 64 * 1024);
    if (auto* e = std::get_if<S3Error>(&body)) co_return s3.error(*e);
    auto parsed = parse_bucket_encryption(std::get<std::string>(body));
    if (auto* e = std::get_if<S3Error>(&parsed)) co_return s3.error(*e);
    stored = encode_bucket_encryption(std::get<BucketEncryption>(parsed));
  } else if (method != "DELETE") {
    co_return s3.error(errors::method_not_allowed(method, "ENCRYPTION"));
  }
  if (auto e = co_await set_bucket_sysmeta(s3, kBucketEncryptionSysmeta, stored)) {
    co_return s3.error(*e);
  }
  co_return configuration_answer(s3);
}

}  // namespace apus::proxy::s3api
