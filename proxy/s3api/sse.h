// S3 server-side encryption on top of the encryption middleware (proxy/encryption.h), which
// must follow s3api in the pipeline with a keymaster:
//   - SSE-S3 (x-amz-server-side-encryption: AES256): the keymaster's root secrets, as every
//     object the encryption middleware stores; what S3 calls it is kept and answered.
//   - SSE-KMS (aws:kms, x-amz-server-side-encryption-aws-kms-key-id): the object key derived
//     from the named key of the keymaster's local key store (sse_kms_key_<id>), not a KMS.
//   - SSE-C (x-amz-server-side-encryption-customer-*): the object key derived from the
//     client's own key, which is never stored; every read must send it again.
//   - A bucket's default (PutBucketEncryption) for writes that name none.
// Kept with each object (sysmeta, not encrypted):
//   X-Object-Sysmeta-S3api-Sse                    AES256 or aws:kms
//   X-Object-Sysmeta-S3api-Sse-Kms-Key-Id         the KMS key's id
//   X-Object-Sysmeta-S3api-Sse-Customer-Key-Md5   SSE-C: the key's MD5 as the client sent it
//                                                 (S3 answers it back; the keymaster checks
//                                                 the key itself with a MAC)
// and with a bucket: X-Container-Sysmeta-S3api-Encryption ("AES256", or "aws:kms" and the key
// id after a space). A multipart upload keeps its marker's; its parts are encrypted as the
// upload says, and the completed object's manifest with the root secrets (S3 sends no SSE-C
// key with CompleteMultipartUpload).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/http/headers.h"
#include "proxy/pipeline.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

inline constexpr std::string_view kSseSysmeta = "X-Object-Sysmeta-S3api-Sse";
inline constexpr std::string_view kSseKmsKeySysmeta = "X-Object-Sysmeta-S3api-Sse-Kms-Key-Id";
inline constexpr std::string_view kSseCustomerMd5Sysmeta =
    "X-Object-Sysmeta-S3api-Sse-Customer-Key-Md5";
inline constexpr std::string_view kBucketEncryptionSysmeta = "X-Container-Sysmeta-S3api-Encryption";

enum class SseKind { kNone, kS3, kKms, kCustomer };

// How an object is (to be) encrypted in S3's terms.
struct Sse {
  SseKind kind = SseKind::kNone;
  std::string kms_key_id;        // kKms
  std::string customer_key;      // kCustomer: 32 raw bytes (never stored)
  std::string customer_key_md5;  // kCustomer: base64, as the client sent it
};

// A bucket's default encryption (ServerSideEncryptionConfiguration).
struct BucketEncryption {
  SseKind kind = SseKind::kS3;  // kS3 or kKms
  std::string kms_key_id;       // may be empty: then a write must name one
  bool bucket_key = false;      // BucketKeyEnabled, kept and answered (no effect here)
};

// The SSE-C key of a request: x-amz-server-side-encryption-customer-{algorithm,key,key-MD5},
// or with `copy_source` the x-amz-copy-source-server-side-encryption-customer-* ones. nullopt
// when none is there; InvalidArgument when they are incomplete or wrong (S3's messages).
std::variant<std::optional<Sse>, S3Error> customer_key(const common::http::HeaderMap& h,
                                                       bool copy_source = false);

// What a write asks for: its headers, else the bucket's default; InvalidArgument for an
// unknown algorithm, a KMS key id without aws:kms, SSE-C with another kind, aws:kms with no key
// id anywhere.
std::variant<Sse, S3Error> write_sse(const common::http::HeaderMap& client,
                                     const std::optional<BucketEncryption>& bucket_default);
// What a read (GET, HEAD) brings: SSE-C's key only; x-amz-server-side-encryption and a KMS key
// id are refused, as S3 refuses them on reads.
std::variant<Sse, S3Error> read_sse(const common::http::HeaderMap& client);

// A write's sysmeta (in `swift`) and the keymaster's instructions (in `env`).
void apply_write_sse(const Sse& sse, common::http::HeaderMap& swift, ProxyEnv& env);
// The client's SSE headers stay in the proxy: the storage servers never see a client's key.
void drop_sse_headers(common::http::HeaderMap& swift);
// A read's: the client's key for the keymaster; no SSE header goes on to the storage servers.
void apply_read_sse(const Sse& sse, common::http::HeaderMap& swift, ProxyEnv& env);
// The S3 response headers of an object stored with `swift`'s sysmeta (or of a write of `sse`).
void add_sse_headers(const common::http::HeaderMap& swift, common::http::HeaderMap& s3);
void add_sse_headers(const Sse& sse, common::http::HeaderMap& s3);
// The stored object's encryption, from its sysmeta.
Sse stored_sse(const common::http::HeaderMap& swift);

// The S3 error of a read whose SSE-C key does not fit the stored object (`refusal` is the
// encryption middleware's, ProxyEnv::sse_refusal); nullopt when it fits.
std::optional<S3Error> read_sse_refusal(const common::http::HeaderMap& swift, const Sse& read,
                                        const std::string& refusal);
// The same for the collected answer of a subrequest that read an object (a 400 from the
// encryption middleware is its refusal of the key).
std::optional<S3Error> read_sse_refusal(const common::http::Response& answer, const Sse& read);
// The S3 error of a write the encryption middleware refused (an unknown KMS key), if any.
std::optional<S3Error> write_sse_refusal(const std::string& refusal);

// PutBucketEncryption's document; MalformedXML or InvalidArgument (S3's) when bad.
std::variant<BucketEncryption, S3Error> parse_bucket_encryption(std::string_view xml);
std::string bucket_encryption_document(const BucketEncryption& e);
std::string encode_bucket_encryption(const BucketEncryption& e);
std::optional<BucketEncryption> decode_bucket_encryption(std::string_view stored);

}  // namespace apus::proxy::s3api
