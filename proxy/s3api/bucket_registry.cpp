// The global bucket namespace (global_bucket_namespace = true): S3 bucket names are unique in
// the cluster, and a bucket is found in its owner's account whoever asks. Swift's s3api has
// none (a bucket is always the requester's own container), which rules out what S3 clients do
// with other accounts' buckets: grants to other users, public buckets, anonymous requests.
//
// The registry is one object per bucket, <bucket_registry_account>/buckets/<bucket>, holding
// the account and the S3 owner in sysmeta. CreateBucket claims the name with
// "If-None-Match: *" before making the container, DeleteBucket frees it after removing the
// container; lookups go through memcached. A bucket with no entry (made before the option was
// on, or with Swift's API) is the requester's own, as without the registry.
//
// A crash between the claim and the container PUT, or between the container DELETE and the
// release, leaves an entry whose container is gone: the next CreateBucket of that name, by
// anyone, finds the container missing and takes the name over.
#include <string>
#include <variant>

#include <boost/json.hpp>

#include "common/http/url.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "proxy/memcache.h"
#include "proxy/s3api/s3_request.h"
#include "proxy/s3api/s3_response.h"
#include "proxy/subrequest.h"

namespace apus::proxy::s3api {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

constexpr std::string_view kAccountSysmeta = "X-Object-Sysmeta-S3api-Account";
constexpr std::string_view kOwnerSysmeta = "X-Object-Sysmeta-S3api-Owner";
constexpr const char* kRegistryContainer = "buckets";
// How long memcached keeps an entry. Entries change only when a bucket is deleted, which drops
// the cached one first.
constexpr double kCacheTtl = 300;
// How long it keeps that a name has no entry: anonymous requests for names that are no bucket
// then cost the registry one HEAD per name every few seconds, not one per request. A claim
// drops it, so a new bucket is found at once.
constexpr double kMissTtl = 10;
constexpr std::string_view kNoEntry = "{}";

std::string cache_key(const std::string& bucket) { return "s3api/bucket/" + bucket; }

std::string entry_path(const S3Request& s3, const std::string& bucket) {
  return "/v1/" + s3.config.bucket_registry_account + "/" + kRegistryContainer + "/" + bucket;
}

// A request to the registry: pre-authorized (the registry is s3api's, not the user's).
net::awaitable<common::Result<Response>> registry_call(S3Request& s3, const std::string& method,
                                                       std::string path, HeaderMap h) {
  Request req = make_subrequest(method, std::move(path), "", std::move(h));
  co_return co_await run_subrequest(s3.next, std::move(req), pre_authed_env(s3.env, "S3"),
                                    1 << 16);
}

std::string holder_json(const BucketHolder& h) {
  boost::json::object o;
  o["account"] = h.account;
  o["owner"] = h.owner;
  return boost::json::serialize(o);
}

std::optional<BucketHolder> holder_from_json(std::string_view text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* account = v.as_object().if_contains("account");
  const auto* owner = v.as_object().if_contains("owner");
  if (!account || !account->is_string() || !owner || !owner->is_string()) return std::nullopt;
  return BucketHolder{.account = std::string(account->as_string()),
                      .owner = std::string(owner->as_string())};
}

// The registry's entry for `bucket`: memcached's, else the object's (then cached). nullopt:
// none, or the registry could not be read (the bucket is then looked for in the requester's
// account, which is right for every bucket made without the registry).
net::awaitable<std::optional<BucketHolder>> lookup(S3Request& s3, const std::string& bucket,
                                                   bool fresh) {
  Memcache* mc = s3.env.memcache;
  if (mc && !fresh) {
    if (auto cached = co_await mc->get(cache_key(bucket))) {
      if (*cached == kNoEntry) co_return std::nullopt;
      if (auto h = holder_from_json(*cached)) co_return h;
    }
  }
  auto head = co_await registry_call(s3, "HEAD", entry_path(s3, bucket), HeaderMap());
  if (head.ok() && head->status == 404 && mc) {
    co_await mc->set(cache_key(bucket), std::string(kNoEntry), kMissTtl);
  }
  if (!head.ok() || head->status != 200) co_return std::nullopt;
  BucketHolder h{.account = std::string(head->headers.get_or(kAccountSysmeta, "")),
                 .owner = std::string(head->headers.get_or(kOwnerSysmeta, ""))};
  if (h.account.empty()) co_return std::nullopt;
  if (mc) co_await mc->set(cache_key(bucket), holder_json(h), kCacheTtl);
  co_return h;
}

// Writes the entry naming the requester; with `only_new`, only when there is none. The
// status of the write (201, 412 when taken, 0 when the registry is unreachable).
net::awaitable<int> write_entry(S3Request& s3, bool only_new) {
  auto put = [&]() -> net::awaitable<int> {
    HeaderMap h;
    h.set("Content-Length", "0");
    h.set("Content-Type", "application/octet-stream");
    h.set("X-Timestamp", common::Timestamp::now().internal());
    h.set(std::string(kAccountSysmeta), s3.requester_account());
    h.set(std::string(kOwnerSysmeta), s3.user_id());
    if (only_new) h.set("If-None-Match", "*");
    auto r = co_await registry_call(s3, "PUT", entry_path(s3, s3.bucket), std::move(h));
    co_return r.ok() ? r->status : 0;
  };
  int status = co_await put();
  if (status == 404) {
    // The registry's container (and account) are made at the first claim.
    HeaderMap h;
    h.set("Content-Length", "0");
    h.set("X-Timestamp", common::Timestamp::now().internal());
    auto made = co_await registry_call(
        s3, "PUT", "/v1/" + s3.config.bucket_registry_account + "/" + kRegistryContainer,
        std::move(h));
    if (!made.ok() || (made->status != 201 && made->status != 202)) co_return 0;
    status = co_await put();
  }
  co_return status;
}

}  // namespace

net::awaitable<std::optional<BucketHolder>> resolve_bucket(S3Request& s3,
                                                           const std::string& bucket) {
  if (!s3.config.global_bucket_namespace || bucket.empty()) co_return std::nullopt;
  if (auto known = s3.bucket_accounts.find(bucket); known != s3.bucket_accounts.end()) {
    co_return BucketHolder{.account = known->second, .owner = {}};
  }
  auto holder = co_await lookup(s3, bucket, false);
  if (holder && holder->account != s3.requester_account()) {
    s3.bucket_accounts[bucket] = holder->account;
  }
  co_return holder;
}

net::awaitable<std::variant<bool, S3Error>> claim_bucket(S3Request& s3) {
  if (!s3.config.global_bucket_namespace) co_return false;
  if (s3.requester_account().empty()) co_return errors::internal_error();
  int status = co_await write_entry(s3, true);
  if (status == 201) {
    if (Memcache* mc = s3.env.memcache) co_await mc->del(cache_key(s3.bucket));
    co_return true;
  }
  if (status != 412) {
    APUS_LOG_WARNING("s3api: the bucket registry answered " + std::to_string(status) +
                     " to the claim of a bucket name");
    co_return errors::service_unavailable();
  }
  auto holder = co_await lookup(s3, s3.bucket, true);
  if (!holder) co_return errors::service_unavailable();
  if (holder->account == s3.requester_account()) co_return false;
  // Another account's name, unless its container is gone (a crash after the claim or before
  // the release): then it is free to take.
  CachedInfo there = co_await s3.config.info->container_info(holder->account, s3.bucket,
                                                            s3.client, s3.env);
  if (there.status != 404) co_return errors::bucket_already_exists(s3.bucket);
  if (co_await write_entry(s3, false) != 201) co_return errors::service_unavailable();
  if (Memcache* mc = s3.env.memcache) co_await mc->del(cache_key(s3.bucket));
  s3.bucket_accounts.erase(s3.bucket);
  co_return true;
}

net::awaitable<void> release_bucket(S3Request& s3) {
  if (!s3.config.global_bucket_namespace) co_return;
  // Only an entry naming the account whose container went is removed (a bucket of the
  // requester's made without the registry may share its name with a registered one).
  auto holder = co_await lookup(s3, s3.bucket, true);
  auto ours = s3.bucket_accounts.find(s3.bucket);
  const std::string& account =
      ours != s3.bucket_accounts.end() ? ours->second : s3.requester_account();
  if (!holder || holder->account != account) co_return;
  HeaderMap h;
  h.set("X-Timestamp", common::Timestamp::now().internal());
  auto gone = co_await registry_call(s3, "DELETE", entry_path(s3, s3.bucket), std::move(h));
  if (!gone.ok() || (gone->status != 204 && gone->status != 404)) {
    // Harmless: the next CreateBucket of the name finds the container gone and takes it.
    APUS_LOG_WARNING("s3api: could not remove bucket " + s3.bucket + " from the registry");
  }
  if (Memcache* mc = s3.env.memcache) co_await mc->del(cache_key(s3.bucket));
}

}  // namespace apus::proxy::s3api
