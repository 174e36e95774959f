// s3api: the S3 API in front of the Swift API, as Swift's s3api middleware serves it. It sits
// before the auth middleware; a request with S3 credentials (an "AWS"/"AWS4-HMAC-SHA256"
// Authorization header, or a presigned query) is answered in S3's terms, everything else
// passes on untouched.
//
// An S3 request becomes one or more Swift requests, made as subrequests of the rest of the
// pipeline on the path /v1/<access key>/<bucket>/<key>: the auth middleware (tempauth) checks
// the request's signature with that access key's secret (ProxyEnv::s3_signature) and puts the
// user's storage account in place of the access key, so every subrequest is authorized as the
// user's own Swift request would be. Buckets are containers, objects are objects, and what S3
// adds is kept in Swift's layout (s3api sysmeta), so Swift clients and Swift's own s3api see the
// same data. Answers go back as S3's XML and headers (s3_response.h).
//
// Served so far (issue 15 builds the rest): ListBuckets; bucket HEAD, PUT (location
// constraint, canned x-amz-acl), DELETE, ListObjects v1/v2, ListObjectVersions,
// GetBucketLocation, logging, versioning (through object_versioning, when the pipeline has
// it), tagging as Swift's (an empty TagSet; PUT and DELETE not implemented) and
// ListMultipartUploads (of uploads in Swift's layout; creating them is not served yet); object GET, HEAD (with S3's
// Range emulation), PUT (Content-MD5, a signed payload's SHA-256 checked as it streams,
// aws-chunked bodies with chunk signatures, x-amz-checksum-* as header or trailer), CopyObject,
// DELETE (a multipart upload's segments too) and DeleteObjects (multi_delete_concurrency keys
// at a time), and ACLs: without s3_acl as Swift shows and sets them (bucket and object GET,
// bucket PUT); with s3_acl as S3 ACLs in sysmeta that s3api checks on every request (s3_acl.h),
// optionally with bucket names global to the cluster (global_bucket_namespace), which lets
// other accounts and anonymous clients use a bucket its ACLs open to them; bucket CORS
// (cors.h), browser POST uploads (post_policy.h), GetObjectAttributes and the public access
// block. Every other S3 operation answers S3's 501 NotImplemented.
//
// Known gap: Apus's HTTP server hands on header names as Swift's WSGI server does ('_' read
// as '-'), and keeps no raw names, so a Version 4 signature over a header name with '_' (an
// x-amz-meta-foo_bar) does not check; Swift's s3api reads eventlet's raw headers there.
//
// Options ([filter:s3api], Swift's names and defaults): location (us-east-1),
// storage_domain (virtual-hosted-style buckets), dns_compliant_bucket_names (true),
// allowable_clock_skew (900), max_bucket_listing (1000), max_multi_delete_objects (1000),
// multi_delete_concurrency (2), s3_acl (false), allow_no_owner (false),
// check_bucket_owner (false),
// cors_preflight_allow_origin (none); Apus's own: global_bucket_namespace (false) and
// bucket_registry_account (".s3api_buckets").
//
// Thread-safe: the middleware keeps only its configuration.
#pragma once

#include <memory>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

common::Result<std::unique_ptr<Middleware>> make_s3api(const common::Section& section,
                                                       const MiddlewareContext& context);

namespace s3api {
// Swift's validate_bucket_name(): S3's rules for bucket names (3 to 63 characters of
// lower-case letters, digits, '-' and '.', no IP address...), relaxed to 255 characters with
// upper case and '_' when DNS compliance is off.
bool valid_bucket_name(std::string_view name, bool dns_compliant);
}  // namespace s3api

}  // namespace apus::proxy
