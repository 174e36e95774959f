// S3 ACLs as Swift's s3api keeps them with `s3_acl = true`: an owner and grants per bucket and
// per object, stored as JSON in sysmeta (X-Container-Sysmeta-S3api-Acl,
// X-Object-Sysmeta-S3api-Acl), so Swift's s3api reads the same ACLs in a mixed cluster. The
// stored form is Swift's encode_acl(): {"Owner":"<id>","Grant":[{"Permission":"READ",
// "Grantee":"<id>|AllUsers|AuthenticatedUsers|LogDelivery"}]}.
//
// This header is the model (parse, print, decide); s3_acl.cpp also serves ?acl and the access
// check of every request (s3_request.h).
//
// Thread-compatible values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/http/headers.h"
#include "proxy/s3api/s3_response.h"

namespace apus::proxy::s3api {

inline constexpr std::string_view kBucketAclSysmeta = "X-Container-Sysmeta-S3api-Acl";
inline constexpr std::string_view kObjectAclSysmeta = "X-Object-Sysmeta-S3api-Acl";
// A multipart upload's marker keeps the ACL the completed object gets (Swift's "tmpacl").
inline constexpr std::string_view kUploadAclSysmeta = "X-Object-Sysmeta-S3api-Tmpacl";

enum class Permission : uint8_t { kFullControl, kRead, kWrite, kReadAcp, kWriteAcp };
std::string_view permission_name(Permission p);  // "READ_ACP"

// Who a grant is for: a user (the S3 user ID, tempauth's "account:user") or one of S3's
// predefined groups.
enum class GranteeKind : uint8_t { kUser, kAllUsers, kAuthenticatedUsers, kLogDelivery };

struct Grant {
  GranteeKind kind = GranteeKind::kUser;
  std::string user;  // kUser only
  Permission permission = Permission::kRead;
  bool operator==(const Grant&) const = default;
};

struct Acl {
  std::string owner;  // empty: none known (written before s3_acl, or by a Swift client)
  std::vector<Grant> grants;
  bool operator==(const Acl&) const = default;
};

// Swift's canned ACLs ("private", "public-read", ...) for a resource owned by `owner` in a
// bucket owned by `bucket_owner`; nullopt for an unknown name.
std::optional<Acl> canned_acl(std::string_view name, const std::string& bucket_owner,
                              const std::string& owner);

// The stored JSON, and back (nullopt: nothing usable stored, which counts as no ACL).
std::string encode_acl(const Acl& acl);
std::optional<Acl> decode_acl(std::string_view json);

// The AccessControlPolicy document of GET ?acl.
std::string acl_document(const Acl& acl);
// An AccessControlPolicy document a client PUTs: MalformedACLError when it is not one,
// NotImplemented for e-mail grantees, InvalidArgument for an unknown group URI.
std::variant<Acl, S3Error> parse_acl_document(std::string_view xml);

// The ACL that x-amz-acl or x-amz-grant-* headers ask for (nullopt: neither is there), for a
// resource that `owner` will own in a bucket of `bucket_owner`. Both kinds at once is
// InvalidRequest; an unknown canned ACL or grantee type is InvalidArgument.
std::variant<std::optional<Acl>, S3Error> acl_from_headers(const common::http::HeaderMap& h,
                                                           const std::string& bucket_owner,
                                                           const std::string& owner);

// Whether `user` ("" for an anonymous request) may do what `p` allows: the owner may do
// anything; others need a grant of `p` or FULL_CONTROL to them or a group they are in
// (`ignore_public`: not AllUsers or AuthenticatedUsers, as IgnorePublicAcls asks).
bool permits(const Acl& acl, std::string_view user, Permission p, bool ignore_public = false);

// Whether the ACL grants anything to everyone or to every authenticated user (S3's "public").
bool is_public(const Acl& acl);

// A bucket's public access block (PutPublicAccessBlock), kept in
// X-Container-Sysmeta-S3api-Public-Access-Block. BlockPublicAcls refuses public ACLs on the
// bucket and its new objects; IgnorePublicAcls makes the public grants count for nothing.
// BlockPublicPolicy and RestrictPublicBuckets are kept and shown: they are about bucket
// policies, which Apus does not have yet.
inline constexpr std::string_view kPublicAccessBlockSysmeta =
    "X-Container-Sysmeta-S3api-Public-Access-Block";
struct PublicAccessBlock {
  bool block_public_acls = false;
  bool ignore_public_acls = false;
  bool block_public_policy = false;
  bool restrict_public_buckets = false;
  bool operator==(const PublicAccessBlock&) const = default;
};
// The PublicAccessBlockConfiguration document a client PUTs (MalformedXML when it is not one).
std::variant<PublicAccessBlock, S3Error> parse_public_access_block(std::string_view xml);
std::string public_access_block_document(const PublicAccessBlock& b);
std::string encode_public_access_block(const PublicAccessBlock& b);
// nullopt: none stored.
std::optional<PublicAccessBlock> decode_public_access_block(std::string_view stored);

// A bucket's object ownership (PutBucketOwnershipControls, or x-amz-object-ownership on
// CreateBucket), kept in X-Container-Sysmeta-S3api-Ownership:
// - ObjectWriter: the writer of an object owns it (S3's behaviour before ownership controls,
//   and Apus's when none is set);
// - BucketOwnerPreferred: an object written with the bucket-owner-full-control canned ACL
//   belongs to the bucket's owner;
// - BucketOwnerEnforced: ACLs are off: every object is the bucket owner's, a write with an ACL
//   other than bucket-owner-full-control and any ACL change are AccessControlListNotSupported,
//   and only the bucket's owner and its policy give access.
inline constexpr std::string_view kOwnershipSysmeta = "X-Container-Sysmeta-S3api-Ownership";
enum class ObjectOwnership : uint8_t { kObjectWriter, kBucketOwnerPreferred, kBucketOwnerEnforced };
std::optional<ObjectOwnership> ownership_from_name(std::string_view name);
std::string_view ownership_name(ObjectOwnership o);
// The OwnershipControls document a client PUTs (one Rule; MalformedXML otherwise).
std::variant<ObjectOwnership, S3Error> parse_ownership_controls(std::string_view xml);
std::string ownership_controls_document(ObjectOwnership o);

}  // namespace apus::proxy::s3api
