// What s3api's operations share (s3api.h): the configuration, one S3 request being served,
// and the Swift subrequests an operation makes for it (Swift's S3Request.get_response and
// to_swift_req), with the S3 error of an unexpected Swift answer. The operations are in
// bucket.cpp (ListBuckets, bucket HEAD/PUT/DELETE, ListObjects), object.cpp and multipart.cpp.
//
// Internal to proxy/s3api. Thread-compatible: an S3Request belongs to one request.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "proxy/pipeline.h"
#include "proxy/s3api/checksum.h"
#include "proxy/s3api/cors.h"
#include "proxy/s3api/object_lock.h"
#include "proxy/s3api/s3_acl.h"
#include "proxy/s3api/s3_auth.h"
#include "proxy/s3api/sse.h"

namespace apus::proxy::s3api {

struct S3ApiConfig {
  S3AuthConfig auth;
  std::vector<std::string> storage_domains;
  bool dns_compliant_bucket_names = true;
  int64_t max_bucket_listing = 1000;
  bool allow_multipart_uploads = true;  // and slo follows s3api in the pipeline
  bool info_allow_multipart_uploads = true;  // the option, as /info shows it
  int64_t max_object_name_length = 1024;  // swift.conf's
  int64_t max_multi_delete_objects = 1000;
  int64_t multi_delete_concurrency = 2;  // DeleteObjects' keys deleted at a time
  int64_t max_parts_listing = 1000;
  int64_t max_upload_part_num = 1000;
  int64_t min_segment_size = 5242880;
  // s3_acl: S3 ACLs kept in sysmeta and checked by s3api itself (s3_acl.h), as Swift's s3api
  // does with the same option. allow_no_owner: a bucket or object without an ACL is open to
  // everyone (Swift's option); without it, to the users of the account that holds it.
  bool s3_acl = false;
  bool allow_no_owner = false;
  bool check_bucket_owner = false;  // ListBuckets shows only the buckets the user may read
  // Bucket names unique in the cluster, as S3's are (bucket_registry.cpp): a bucket is found in
  // its owner's account whoever asks, which cross-account grants and anonymous requests need.
  // The registry is the account `bucket_registry_account`; Apus's own option.
  bool global_bucket_namespace = false;
  std::string bucket_registry_account = ".s3api_buckets";
  // Origins whose CORS preflight of any S3 request is allowed without looking at a bucket
  // ("*": all), as Swift's s3api option of this name; empty: bucket CORS rules decide.
  std::vector<std::string> cors_preflight_allow_origin;
  InfoLookup* info = nullptr;  // the proxy's cached account and container HEADs
  // Server-side encryption (sse.h): the encryption middleware follows s3api in the pipeline.
  bool encryption = false;
};

inline constexpr int64_t kMax32BitInt = 2147483647;

class BucketPolicy;  // bucket_policy.h

// Whether an object read's permission is still to be checked on the answer (s3_acl).
enum class ObjectReadCheck : uint8_t { kDone, kOnAnswer };

// One S3 request being served.
struct S3Request {
  const common::http::Request& client;
  ProxyEnv& env;
  const Next& next;
  const S3ApiConfig& config;
  std::string bucket;               // empty: the service (ListBuckets)
  std::optional<std::string> key;   // the object key, if any
  std::map<std::string, std::string> params;
  std::shared_ptr<S3Signature> signature;  // null: an anonymous request (s3_acl.cpp)
  bool acl_header_used = false;     // x-amz-acl went into a subrequest already
  // Buckets found in another account than the requester's (the global bucket namespace): the
  // Swift paths of these buckets and their "+segments" containers name that account.
  std::map<std::string, std::string> bucket_accounts{};
  // s3_acl (check_access()): the bucket's ACL as stored (nullopt: none), and the ACL a write
  // of a bucket or an object stores with what it writes.
  std::optional<Acl> bucket_acl{};
  std::optional<Acl> new_acl{};
  std::optional<PublicAccessBlock> public_block{};  // the bucket's, as check_access() read it
  ObjectOwnership ownership = ObjectOwnership::kObjectWriter;  // the bucket's, likewise
  // The bucket's Object Lock configuration once its info was read (check_access() reads it,
  // so that a write does not look it up again).
  std::optional<std::optional<LockConfiguration>> bucket_lock_read{};
  // The bucket's cached info once a write read it (its lock and encryption defaults).
  std::optional<CachedInfo> bucket_info_read{};
  // A read's SSE-C key (sse.h), which every Swift subrequest made for it carries.
  std::string sse_customer_key{};
  // The bucket's policy, when it has one, and whether its Allow let the request in (an object
  // read then needs no ACL).
  std::shared_ptr<const BucketPolicy> bucket_policy{};
  bool policy_allowed = false;
  // DeleteObjects on a bucket with a policy: whether the ACLs let the requester delete (the
  // policy then decides each key, may_delete_key()).
  std::optional<bool> delete_by_acl{};
  // A plain object GET or HEAD is allowed on its own answer (check_read_on_answer()).
  ObjectReadCheck object_read_check = ObjectReadCheck::kDone;

  bool has(std::string_view p) const { return params.count(std::string(p)) > 0; }
  bool anonymous() const { return signature == nullptr; }
  // The user, as Swift's s3api names it for tempauth (Owner/ID): the access key; "" when
  // anonymous.
  const std::string& user_id() const;
  common::http::Response error(const S3Error& e) const;
  // The account part of Swift paths in the requester's own account: the storage account once
  // the auth middleware found it, else the access key (which it replaces).
  const std::string& account() const;
  // The requester's storage account once authenticated; "" before, and when anonymous.
  const std::string& requester_account() const;
};

// A Swift answer, or the S3 error that stands for it.
using SwiftAnswer = std::variant<common::http::Response, S3Error>;

// The headers of a Swift request for `s3` (Swift's to_swift_req): the client's headers but its
// framing ones, x-amz-meta-* as X-Object-Meta-* (an '_' as "=5F"), and x-amz-acl as container
// ACL headers the first time (a bad one is the error returned).
std::variant<common::http::HeaderMap, S3Error> swift_headers(S3Request& s3);

// x-amz-meta-<name> (`name` whole) as Swift's X-Object-Meta-<name> in `h`, an '_' written
// "=5F" (Swift's quoted-printable reading), repeats joined with ','; ignored when the name has
// characters S3 does not take.
void add_user_metadata(std::string_view name, std::string_view value, common::http::HeaderMap& h);

// Swift's translation of a canned x-amz-acl into container ACL headers set in `h`, or the
// error it is (InvalidArgument; NotImplemented for authenticated-read, log-delivery-write).
std::optional<S3Error> add_acl_headers(std::string_view acl, common::http::HeaderMap& h);

// BadDigest for a checksum of `a` that is not the one computed.
S3Error checksum_mismatch(ChecksumAlgorithm a);

// The S3 error for a 404 of s3's object: NoSuchKey when the bucket is there, else
// NoSuchBucket (Swift's not_found_handler; "+segments" buckets count as there).
boost::asio::awaitable<S3Error> object_not_found(S3Request& s3);

// The Swift path of `bucket` and `key`: "/v1/<account>[/b[/k]]", in the account that holds
// the bucket (bucket_accounts), else the user's.
std::string swift_path(const S3Request& s3, const std::string& bucket,
                       const std::optional<std::string>& key);
// The Swift subrequest `method` on swift_path(s3, bucket, key) with `query` and `headers`; its
// path becomes the S3 request's swift.backend_path (proxy_logging's metrics go by it).
common::http::Request swift_request(S3Request& s3, std::string method, const std::string& bucket,
                                    const std::optional<std::string>& key,
                                    std::string_view query, common::http::HeaderMap headers);

// Runs a Swift request for `s3` (`query` already encoded) and collects its small answer.
// `edit`, when given, changes the request's headers last.
// `env_edit`, when given, changes the subrequest's ProxyEnv (server-side encryption's keys).
using HeaderEdit = std::function<void(common::http::HeaderMap&)>;
using EnvEdit = std::function<void(ProxyEnv&)>;
boost::asio::awaitable<SwiftAnswer> call_swift(S3Request& s3, const std::string& method,
                                               const std::string& bucket,
                                               const std::optional<std::string>& key,
                                               std::string query = {},
                                               size_t max_body = 1 << 20,
                                               HeaderEdit edit = {}, EnvEdit env_edit = {});

// The ProxyEnv of a Swift subrequest for `s3` (the signature goes along for the auth
// middleware).
ProxyEnv swift_env(const S3Request& s3);

// The S3 error for a Swift status no operation expects (the end of Swift's _get_response).
S3Error unexpected(const S3Request& s3, const common::http::Response& r);

// Swift's S3Request.xml(): the request body of an XML document, at most `max_length` bytes
// (longer: MalformedXML); nullopt when the request has no body.
boost::asio::awaitable<std::variant<std::optional<std::string>, S3Error>> read_xml_body(
    common::http::Exchange& ex, size_t max_length);

// A configuration document's body (tagging, CORS, public access block): read_xml_body(), with
// MalformedXML when there is none and BadDigest when a Content-MD5 does not match it.
boost::asio::awaitable<std::variant<std::string, S3Error>> read_configuration(
    common::http::Exchange& ex, const S3Request& s3, size_t max_length);

// BadDigest (with the ContentMd5 Swift names) when the request has a Content-MD5 that is not
// `body`'s; nullopt when it matches or is absent.
std::optional<S3Error> content_md5_mismatch(const S3Request& s3, std::string_view body);

// Swift's get_validated_param(): an integer query parameter in [0, 2^31-1] (InvalidArgument
// otherwise), `def` when absent, capped at `limit`.
std::variant<int64_t, S3Error> validated_param(const S3Request& s3, const std::string& name,
                                               int64_t def, int64_t limit = kMax32BitInt);

// A listing's last_modified ("2026-12-02T01:30:15.123450") as S3 writes times, rounded up to
// the second ("2026-12-02T01:30:16.000Z").
std::string s3_listing_time(std::string_view iso);

// The headers of a metadata POST made for s3 alone: none of the client's (its Content-Type,
// x-amz-meta-* or Swift headers are not this operation's), but those that say who asks.
common::http::HeaderMap own_headers(const common::http::HeaderMap& client);
// What an object POST must send again to keep it (Swift's POST replaces these): user metadata,
// transient sysmeta (tags, a changed ACL), and the content headers and expiry a POST may set,
// from the object's HEAD answer.
void keep_object_metadata(const common::http::HeaderMap& head, common::http::HeaderMap& post);

// Stores one sysmeta header of s3's bucket with a POST (an empty `value` removes it) and drops
// the bucket's cached info, so every proxy sees the change: nullopt, or the error
// (NoSuchBucket).
boost::asio::awaitable<std::optional<S3Error>> set_bucket_sysmeta(S3Request& s3,
                                                                   std::string_view name,
                                                                   const std::string& value);
// The same for several headers at once (name, value; an empty value removes the header).
boost::asio::awaitable<std::optional<S3Error>> set_bucket_sysmeta(
    S3Request& s3, const std::vector<std::pair<std::string, std::string>>& headers);
// The bucket's container headers from a HEAD, not the cache (a configuration just changed
// through another proxy shows at once), for the GET of a configuration kept in sysmeta; or the
// error (NoSuchBucket).
boost::asio::awaitable<std::variant<common::http::HeaderMap, S3Error>> bucket_headers(
    S3Request& s3);
// The answer of a bucket configuration's PUT (200) or DELETE (204).
common::http::Response configuration_answer(const S3Request& s3);
// The bucket's container info from the proxy's cache, read once per request (a write's
// defaults: Object Lock, encryption); status 0 when it cannot be read.
boost::asio::awaitable<CachedInfo> bucket_info(S3Request& s3);
// GetBucketEncryption, PutBucketEncryption, DeleteBucketEncryption (?encryption; sse.cpp).
boost::asio::awaitable<common::http::Response> bucket_encryption_request(
    common::http::Exchange& ex, S3Request& s3);
// A write's encryption in S3's terms: its headers, else the bucket's default (sse.h).
boost::asio::awaitable<std::variant<Sse, S3Error>> write_encryption(S3Request& s3);
// The same with the SSE headers of `asked` (a browser upload's fields).
boost::asio::awaitable<std::variant<Sse, S3Error>> write_encryption(
    S3Request& s3, const common::http::HeaderMap& asked);

// ---- Access (s3_acl.cpp, bucket_registry.cpp) ----
// With s3_acl: authenticates a signed request up front (a TEST request the auth middleware
// checks, as Swift's S3AclRequest does), so that the requester's account is known; nullopt, or
// the error (SignatureDoesNotMatch).
boost::asio::awaitable<std::optional<S3Error>> authenticate(S3Request& s3);
// With s3_acl: whether the requester may do what the request asks, by the bucket's and the
// object's ACLs (Swift's ACL_MAP and acl_handlers): nullopt, or the error (AccessDenied,
// NoSuchBucket). Sets s3.bucket_acl, and s3.new_acl for a write.
boost::asio::awaitable<std::optional<S3Error>> check_access(S3Request& s3);
// Whether the requester may do `permission` on s3's object, by its ACL read with a HEAD:
// nullopt, or the error (AccessDenied; a missing key is AccessDenied too unless the requester
// may list the bucket).
boost::asio::awaitable<std::optional<S3Error>> check_object_access(S3Request& s3,
                                                                   Permission permission);
// The object GET or HEAD's check that check_access() left to its answer (`status`, the Swift
// headers): nullopt when allowed (or nothing was left), else the error to answer instead.
boost::asio::awaitable<std::optional<S3Error>> check_read_on_answer(
    S3Request& s3, int status, const common::http::HeaderMap& swift);
// Whether the requester may read (list) `bucket` of its own account, by the bucket's ACL.
boost::asio::awaitable<bool> may_list_bucket(S3Request& s3, const std::string& bucket);
// Whether the requester may read a copy's source, `key` of `bucket` in `account`, whose HEAD
// answered `headers` (`version`: a version of it): by the source bucket's policy, then the
// object's ACL.
boost::asio::awaitable<bool> may_read_copy_source(S3Request& s3, const std::string& bucket,
                                                  const std::string& key, bool version,
                                                  const common::http::HeaderMap& headers,
                                                  const std::string& account);
// DeleteObjects: whether the requester may delete `key` (`version`), by the bucket's policy
// (s3:DeleteObject or s3:DeleteObjectVersion on that key) and then its ACL, as check_access()
// left it; true when check_access() decided for the whole request.
bool may_delete_key(const S3Request& s3, const std::string& key,
                    const std::optional<std::string>& version);
// Whether the bucket's policy (as check_access() read it) allows `action` on `key` to the
// requester, with no Deny of it.
bool policy_allows(const S3Request& s3, const std::string& action, const std::string& key);
// The ACL for what a write stores (s3.new_acl), as the header to add to it.
void add_new_acl(const S3Request& s3, std::string_view sysmeta_name, common::http::HeaderMap& h);
// A browser POST upload (s3_acl): whether the requester may write `key` in the bucket (its
// policy's s3:PutObject, else the bucket's ACL), with s3.new_acl set from the form's acl and
// x-amz-grant-* fields (in `acl_fields`, as the bucket's ownership controls allow). nullopt,
// or the error.
boost::asio::awaitable<std::optional<S3Error>> check_post_access(
    S3Request& s3, const std::string& key, const common::http::HeaderMap& acl_fields);
// ?publicAccessBlock with s3_acl: GET, PUT and DELETE of a bucket's public access block.
boost::asio::awaitable<common::http::Response> public_access_block_request(
    common::http::Exchange& ex, S3Request& s3);
// ?policy with s3_acl: GET, PUT and DELETE of a bucket's policy (bucket_policy.h), and
// ?policyStatus (GET: whether the policy or the ACL makes the bucket public).
boost::asio::awaitable<common::http::Response> bucket_policy_request(common::http::Exchange& ex,
                                                                     S3Request& s3);
boost::asio::awaitable<common::http::Response> bucket_policy_status(S3Request& s3);
// ?ownershipControls with s3_acl: GET, PUT and DELETE of a bucket's object ownership.
boost::asio::awaitable<common::http::Response> ownership_controls_request(
    common::http::Exchange& ex, S3Request& s3);
// ?acl with s3_acl: GET and PUT of a bucket's or an object's ACL.
boost::asio::awaitable<common::http::Response> s3_acl_request(common::http::Exchange& ex,
                                                              S3Request& s3);

// The global bucket namespace: where `bucket` is (its registry entry, memcached first); it
// fills s3.bucket_accounts when that is not the requester's account. nullopt when the registry
// has no entry (the bucket, if any, is in the requester's account, as in Swift).
struct BucketHolder {
  std::string account;
  std::string owner;
};
boost::asio::awaitable<std::optional<BucketHolder>> resolve_bucket(S3Request& s3,
                                                                   const std::string& bucket);
// CreateBucket's claim of s3.bucket for the requester's account: whether it was claimed now
// (false: the account's already, or no global namespace), else the error
// (BucketAlreadyExists).
boost::asio::awaitable<std::variant<bool, S3Error>> claim_bucket(S3Request& s3);
// After a DeleteBucket (or a CreateBucket that failed after its claim): the name is free.
boost::asio::awaitable<void> release_bucket(S3Request& s3);

// ---- CORS (cors.cpp) ----
// ?cors: GET, PUT and DELETE of a bucket's CORS rules.
boost::asio::awaitable<common::http::Response> cors_request(common::http::Exchange& ex,
                                                            S3Request& s3);
// A preflight (OPTIONS) of s3's bucket, which must be known (s3.bucket_accounts, or the
// requester's): 200 with the matching rule's Access-Control-* headers, 400 without Origin or
// Access-Control-Request-Method, 403 AccessForbidden when no rule allows it, NoSuchBucket.
boost::asio::awaitable<common::http::Response> cors_preflight(S3Request& s3);
// The CORS rules of s3's bucket (none when it has none or is not there), from the cached
// container info.
boost::asio::awaitable<std::vector<CorsRule>> bucket_cors_rules(S3Request& s3);

// ---- Object Lock (object_lock.cpp) ----
// The account that holds s3's bucket (the registry's, else the requester's own).
const std::string& bucket_holder(const S3Request& s3);
// The bucket's Object Lock configuration (cached container info); nullopt: it has none.
boost::asio::awaitable<std::optional<LockConfiguration>> bucket_lock(S3Request& s3);
// The lock metadata a new version written by s3 gets (its x-amz-object-lock-* headers, else
// the bucket's default retention), or the error (lock_for_write()).
using LockHeaders = std::vector<std::pair<std::string, std::string>>;
boost::asio::awaitable<std::variant<LockHeaders, S3Error>> new_version_lock(S3Request& s3);
// ?object-lock on a bucket (GET, PUT), ?retention and ?legal-hold on an object (GET, PUT).
boost::asio::awaitable<common::http::Response> object_lock_request(common::http::Exchange& ex,
                                                                   S3Request& s3);
boost::asio::awaitable<common::http::Response> retention_request(common::http::Exchange& ex,
                                                                 S3Request& s3);
boost::asio::awaitable<common::http::Response> legal_hold_request(common::http::Exchange& ex,
                                                                  S3Request& s3);
// A DELETE of `version` of `key` in a bucket with Object Lock: AccessDenied while the version
// is held (a GOVERNANCE retention gives way to x-amz-bypass-governance-retention: true).
boost::asio::awaitable<std::optional<S3Error>> version_delete_refused(S3Request& s3,
                                                                      const std::string& key,
                                                                      const std::string& version);

// The operations.
boost::asio::awaitable<common::http::Response> list_buckets(S3Request& s3);
boost::asio::awaitable<common::http::Response> head_bucket(S3Request& s3);
boost::asio::awaitable<common::http::Response> put_bucket(common::http::Exchange& ex,
                                                          S3Request& s3);
boost::asio::awaitable<common::http::Response> delete_bucket(S3Request& s3);
// ListObjects v1/v2 and ListObjectVersions (?versions; `object_versioning`: whether the
// pipeline serves object versioning, so that versions listings say which one is the latest).
boost::asio::awaitable<common::http::Response> list_objects(S3Request& s3, bool object_versioning);
// ?location (GetBucketLocation) and ?logging (GET: never enabled; PUT: not implemented).
boost::asio::awaitable<common::http::Response> bucket_location(S3Request& s3);
boost::asio::awaitable<common::http::Response> bucket_logging(S3Request& s3);
// Object GET, HEAD, PUT and DELETE answer the client themselves (bodies stream).
boost::asio::awaitable<void> object_request(common::http::Exchange& ex, S3Request& s3);
// ?versioning: GET (the container's X-Versions-Enabled as S3's Status) and PUT (through
// object_versioning, which must be in the pipeline: `object_versioning`).
boost::asio::awaitable<common::http::Response> bucket_versioning(common::http::Exchange& ex,
                                                                 S3Request& s3,
                                                                 bool object_versioning);
// ?acl: GET (the owner's grant and the container's public ACLs) and bucket PUT (canned
// x-amz-acl or an AccessControlPolicy document; object ACLs are not implemented, as in Swift).
boost::asio::awaitable<common::http::Response> acl_request(common::http::Exchange& ex,
                                                           S3Request& s3);
// The bucket must exist (a HEAD of it, Swift's check_container_existence): nullopt, or the
// error to answer (NoSuchBucket).
boost::asio::awaitable<std::optional<S3Error>> bucket_must_exist(S3Request& s3);

// GetObjectAttributes (GET ?attributes): the x-amz-object-attributes asked for (ETag,
// Checksum, ObjectParts with x-amz-max-parts and x-amz-part-number-marker, StorageClass,
// ObjectSize) of the object or version.
boost::asio::awaitable<common::http::Response> object_attributes(S3Request& s3);

// Where an object PUT stores what it is sent: the client's bucket and key, or (UploadPart) a
// part's object in the segments container.
struct PutTarget {
  std::string container;
  std::string object;
  bool part = false;  // UploadPart: no key length check; a copy may take a range of its source
  // UploadPart: the encryption its upload asked for (the client's own key sent again with
  // SSE-C), which the part gets whatever its headers say.
  std::optional<Sse> sse = std::nullopt;
};
// Object PUT, or with x-amz-copy-source a copy (CopyObject, UploadPartCopy) (object.cpp).
boost::asio::awaitable<void> put_object(common::http::Exchange& ex, S3Request& s3,
                                        const PutTarget& target);

// Multipart uploads (multipart.cpp), each on the sub-resource Swift's controllers serve it:
// ?uploads (ListMultipartUploads, CreateMultipartUpload), ?partNumber (UploadPart,
// UploadPartCopy), ?uploadId (ListParts, AbortMultipartUpload, CompleteMultipartUpload).
boost::asio::awaitable<void> uploads_request(common::http::Exchange& ex, S3Request& s3);
boost::asio::awaitable<void> part_request(common::http::Exchange& ex, S3Request& s3);
boost::asio::awaitable<void> upload_request(common::http::Exchange& ex, S3Request& s3);
// What a bucket DELETE does first (Swift's _delete_segments_bucket): an empty bucket's segments
// container is emptied and deleted. nullopt, or the error to answer.
boost::asio::awaitable<std::optional<S3Error>> delete_segments_container(S3Request& s3);
// ?tagging on an object or a bucket: GET, PUT and DELETE of its tags (tagging.cpp).
boost::asio::awaitable<common::http::Response> tagging_request(common::http::Exchange& ex,
                                                               S3Request& s3);
// The x-amz-tagging header of an object write as the value to store in
// X-Object-Transient-Sysmeta-S3api-Tagging: nullopt when there is none, or the error
// (InvalidTag).
std::variant<std::optional<std::string>, S3Error> tagging_header_sysmeta(const S3Request& s3);
// Swift's s3api keeps a slow CompleteMultipartUpload's client waiting with heartbeats: runs
// `work` (which gives the answer) and, when it takes longer than `grace`, starts a 200 answer
// (application/xml, chunked), sends the XML declaration and then a space every `interval`
// until `work` is done; the answer's document follows (an error's too, after a newline: the
// status was sent). Returns the answer for the caller to send when none was started, else
// nullopt. Runs `work` as a coroutine of its own on the caller's executor, which must be one
// thread, and returns only when `work` has ended.
boost::asio::awaitable<std::optional<common::http::Response>> with_heartbeat(
    common::http::Exchange& ex, std::string_view trans_id,
    std::function<boost::asio::awaitable<common::http::Response>()> work,
    std::chrono::steady_clock::duration grace, std::chrono::steady_clock::duration interval);

// A browser-based upload (POST of a multipart/form-data body to a bucket, post_object.cpp):
// the form's policy and signature checked, its file stored as the key it names, answered as
// success_action_status or success_action_redirect say.
boost::asio::awaitable<void> post_object(common::http::Exchange& ex, S3Request& s3);

// POST ?delete: DeleteObjects.
boost::asio::awaitable<common::http::Response> delete_objects(common::http::Exchange& ex,
                                                              S3Request& s3);

}  // namespace apus::proxy::s3api
