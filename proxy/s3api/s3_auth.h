// S3 request authentication, as Swift's s3api reads a request's credentials: AWS Signature
// Version 2 (the "AWS <key>:<sig>" header, or the AWSAccessKeyId/Signature/Expires query) and
// Version 4 (the "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." header, or
// the X-Amz-* presigned query), with S3's errors for every malformed, expired or skewed request.
//
// parse_s3_auth() checks everything that needs no secret: the form of the credentials, the
// date and its skew, the presigned expiry, the credential scope (date, region, "s3",
// "aws4_request"), that every x-amz-meta/-acl/-grant/-copy header is signed. It yields an
// S3Signature holding the string to sign; the auth middleware looks up the access key's secret
// and calls check(). With Version 4, check() also keeps the derived signing key, so an
// aws-chunked body's chunk and trailer signatures (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER])
// are checked against it as they arrive.
//
// The payload hash (x-amz-content-sha256) is only read here, as part of what is signed; its
// checks against the body belong to the body's reader.
//
// Thread-compatible: an S3Signature belongs to one request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/http/headers.h"

namespace apus::proxy::s3api {

// An S3 error response: status, Code, Message, and the further elements S3 puts in <Error>
// (tag name, text), in order; and any headers of its own.
struct S3Error {
  int status = 400;
  std::string code;
  std::string message;
  std::vector<std::pair<std::string, std::string>> details;
  // Headers the answer carries besides S3's own (x-amz-delete-marker of a missing key).
  std::vector<std::pair<std::string, std::string>> headers = {};

  static S3Error access_denied(std::string message = "Access Denied.");
  static S3Error signature_does_not_match();
  static S3Error request_time_too_skewed();
  static S3Error authorization_header_malformed(
      std::string message = "The authorization header is malformed; the authorization header "
                            "requires three components: Credential, SignedHeaders, and "
                            "Signature.");
  static S3Error authorization_query_parameters_error(std::string message);
  static S3Error invalid_argument(std::string name, std::string value,
                                  std::string message = "Invalid Argument.");
  static S3Error invalid_request(std::string message = "Invalid Request.");
};

struct S3AuthConfig {
  std::string location = "us-east-1";  // the region Version 4 scopes must name
  int64_t allowable_clock_skew = 900;  // seconds
};

// What of a request the signature covers.
struct S3AuthRequest {
  std::string_view method;
  std::string_view raw_path;  // the path as received, percent-encoding kept
  std::string_view query;     // the query string as received, without '?'
  const common::http::HeaderMap* headers = nullptr;
  // The fields as received when a name has an underscore (Request::raw_headers), else empty:
  // signatures cover the names the client sent.
  const std::vector<std::pair<std::string, std::string>>* raw_headers = nullptr;
  // The bucket named by a virtual-hosted-style Host (Version 2 signs "/<bucket><path>");
  // empty for path-style requests.
  std::string_view bucket_in_host;
};

class S3Signature {
 public:
  enum class Version { kV2, kV4 };

  // The signature of a browser POST upload's policy (its form fields), where the policy's
  // base64 text is what is signed: Version 2 (AWSAccessKeyId, signature: base64 HMAC-SHA1) or,
  // with a `credential` "<key>/<yyyymmdd>/<region>/s3/aws4_request", Version 4
  // (x-amz-signature: hex HMAC-SHA256 with that scope's key). InvalidArgument for a
  // credential that is not one, or of another region or service.
  static std::variant<S3Signature, S3Error> for_post_policy(std::string_view access_key,
                                                           std::string_view credential,
                                                           std::string_view signature,
                                                           std::string_view policy,
                                                           const S3AuthConfig& config);

  Version version() const { return version_; }
  bool presigned() const { return presigned_; }
  const std::string& access_key() const { return access_key_; }
  const std::string& signature() const { return signature_; }
  const std::string& string_to_sign() const { return string_to_sign_; }
  // Version 4 only: the canonical request that was hashed into the string to sign, the
  // "<yyyymmdd>/<region>/s3/aws4_request" scope and the X-Amz-Date form of the signing time.
  const std::string& canonical_request() const { return canonical_request_; }
  const std::string& scope() const { return scope_; }
  const std::string& amz_date() const { return amz_date_; }
  // When the client signed the request (Unix seconds).
  int64_t signing_time() const { return signing_time_; }

  // Whether `secret` made the request's signature (compared in constant time). Version 4
  // keeps the signing key derived from it for check_chunk()/check_trailer(). Once a secret
  // checked, asking again with it costs no HMAC (the auth middleware asks for every
  // subrequest s3api makes).
  bool check(std::string_view secret);
  // An aws-chunked body's next chunk signature (over the chunk's SHA-256, chained to the
  // previous signature). False once any signature failed. REQUIRES: check() returned true.
  bool check_chunk(std::string_view chunk_sha256_hex, std::string_view chunk_signature);
  // The trailing headers' signature (x-amz-trailer-signature among `trailers`, names lower
  // case). REQUIRES: check() returned true.
  bool check_trailer(const std::vector<std::pair<std::string, std::string>>& trailers);

  // The storage account the auth middleware found for the access key ("" until then).
  const std::string& account() const { return account_; }
  void set_account(std::string account) { account_ = std::move(account); }
  // Whether the user owns that account (tempauth: .admin or .reseller_admin), which S3 ACLs
  // require of whoever creates a bucket (Swift's swift_owner).
  bool account_owner() const { return account_owner_; }
  void set_account_owner(bool owner) { account_owner_ = owner; }

  // The details S3 adds to SignatureDoesNotMatch (AWSAccessKeyId, StringToSign, ...).
  std::vector<std::pair<std::string, std::string>> mismatch_details() const;

 private:
  friend struct S3AuthParser;
  Version version_ = Version::kV2;
  bool presigned_ = false;
  std::string access_key_;
  bool account_owner_ = false;
  std::string signature_;  // the client's, then the latest chunk's
  // Version 2 of a path-style request for a bucket: the string to sign with the bucket as
  // "/bucket/", which botocore signs (and AWS takes) for "/bucket".
  std::string v2_bucket_slash_string_to_sign_;
  std::string string_to_sign_;
  std::string canonical_request_;
  std::string scope_;
  std::string amz_date_;
  int64_t signing_time_ = 0;
  std::string signing_key_;  // Version 4, after check()
  std::string verified_secret_;  // the secret that checked, if one did
  std::string account_;
  bool chain_valid_ = true;
};

// The outcome of reading a request's S3 credentials.
struct S3AuthOutcome {
  bool is_s3 = false;  // false: neither S3 header nor S3 query credentials (not an S3 request)
  std::optional<S3Error> error;
  std::optional<S3Signature> signature;
};

// Reads and checks the credentials of `req` at time `now` (Unix seconds).
S3AuthOutcome parse_s3_auth(const S3AuthRequest& req, const S3AuthConfig& config, double now);

// Swift's s3api mktime(): an RFC 2822 date (with its numeric zone applied) or, failing that,
// `iso_format` ("%Y%m%dT%H%M%SZ" or "%Y-%m-%dT%H:%M:%S", the two S3 uses). nullopt when neither
// reads.
std::optional<int64_t> parse_s3_time(std::string_view value, bool compact_iso);

}  // namespace apus::proxy::s3api
