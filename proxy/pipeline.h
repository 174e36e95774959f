// The proxy's middleware pipeline, built from [pipeline:main] as Swift's paste.deploy builds
// it: each filter is a Middleware that may answer a request itself, change it, or pass it on
// to the next one (and see or change what comes back); the last element is the proxy app.
//
// A request travels as a common::http::Exchange (the client's connection) plus a ProxyEnv,
// the state Swift keeps in the WSGI environ (trans-id, the authorize callback, the user's
// groups, cache handles). A middleware that changes the request or wants to see the response
// wraps the Exchange in an ExchangeWrapper subclass and passes the wrapper on; wrappers live in
// the middleware's coroutine frame, which outlives the call it makes.
//
// Thread-compatible per request; a Middleware object is shared by every worker and must be
// thread-safe (most keep only their config).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/http/server.h"
#include "common/status.h"

namespace apus::proxy {

class Memcache;
struct ProxyEnv;
class RequestInfoMemo;
namespace s3api {
class S3Signature;
}

// The decision of an authorize callback: nullopt allows, a response denies.
using Authorize = std::function<boost::asio::awaitable<std::optional<common::http::Response>>(
    const common::http::Request& req, ProxyEnv& env)>;

// What a keymaster hands the encryption middleware (Swift's fetch_crypto_keys() dict): keys
// derived for the request's path, and the key id that says how, which the encryption
// middleware stores beside what it encrypts and gives back to get the same keys again.
struct CryptoKeys {
  std::string container;  // 32 bytes; empty for an account request
  std::string object;     // 32 bytes; empty unless the request names an object
  std::string id;         // the key id, a JSON object (keymaster-specific, opaque to others)
  std::vector<std::string> all_ids;  // the ids of every root secret the keymaster has
  // The id of the container key alone, when `id` names an object key that does not come from
  // the root secrets (S3's SSE-KMS and SSE-C): a container listing is read with this one.
  std::string container_id;
};

// swift.callback.fetch_crypto_keys: the keys of a stored key id, or of the keymaster's active
// secret when `key_id` is null. InvalidArgument for a key id the keymaster cannot read,
// NotFound for a secret it does not have.
using FetchCryptoKeys = std::function<common::Result<CryptoKeys>(const std::string* key_id)>;

// Swift's WSGI environ entries that middlewares and the app share.
struct ProxyEnv {
  std::string trans_id;
  double start_time = 0;               // Unix seconds when the request arrived
  Authorize authorize;                 // swift.authorize; empty: no auth middleware
  std::optional<std::string> acl;      // req.acl: the container ACL authorize() checks
  bool authorize_override = false;     // swift.authorize_override
  // swift.slo_override and swift.symlink_override: a container sync's request (container_sync
  // checked its signature); slo passes it on untouched and symlink stores a static link's
  // ETag and size as sent. Never passed to subrequests.
  bool slo_override = false;
  bool symlink_override = false;
  std::string remote_user;             // groups string, as tempauth sets REMOTE_USER
  bool swift_owner = false;            // swift_owner: may see and set owner headers
  bool reseller_request = false;       // reseller_request: a reseller admin's request (quotas)
  // swift.clean_acl: normalizes an X-Container-Read/-Write value (InvalidArgument with the
  // 400 body when it is bad); set by the auth middleware.
  std::function<common::Result<std::string>(std::string_view header, std::string_view value)>
      clean_acl;
  std::string source;                  // swift.source: which middleware made a subrequest
  // swift.backend_path: the Swift path of the last subrequest s3api made for this S3 request,
  // which proxy_logging's metrics go by. Never passed to subrequests.
  std::string backend_path;
  // The storage policy index of the object request (Swift's proxy sets it on the request as
  // X-Backend-Storage-Policy-Index), for proxy_logging's line and metrics.
  std::string policy_index;
  // Headers the auth middleware wants on the request it authorized (tempauth turns a valid
  // X-Account-Access-Control into X-Account-Sysmeta-Core-Access-Control).
  common::http::HeaderMap add_headers;
  std::map<std::string, std::string> log_info;  // swift.log_info
  // The client's X-Timestamp, taken off its request before the pipeline (gatekeeper passes it
  // on as X-Backend-Inbound-X-Timestamp, as Swift's shunt_inbound_x_timestamp does).
  std::optional<std::string> inbound_x_timestamp;
  Memcache* memcache = nullptr;        // swift.cache
  // swift.infocache: the account and container infos this request has looked up, shared with
  // its subrequests; null: every lookup goes to the cache.
  std::shared_ptr<RequestInfoMemo> info_memo;
  // s3api.auth_details: the signature of the S3 request s3api is serving, which the auth
  // middleware checks with the access key's secret. Shared by all of s3api's subrequests.
  std::shared_ptr<s3api::S3Signature> s3_signature;
  // s3api checks S3 ACLs itself (s3_acl = true): once the signature checks, the auth middleware
  // allows the request whatever its account and makes the user its owner (Swift's S3AclRequest
  // sets swift.authorize_override and swift_owner).
  bool s3_acl = false;
  // swift.content_type_overridden: a middleware set the PUT's Content-Type itself (SLO's
  // ";swift_bytes="), so the app neither guesses it nor refuses its swift_* parameters.
  bool content_type_overridden = false;
  // swift.callback.slo_manifest_hook: more checks of a manifest slo is about to store, given its
  // object segments in order; the problems it returns, (segment name, message), join slo's own.
  // s3api sets it for CompleteMultipartUpload (every part but the last at least
  // min_segment_size, each part's stored checksum the one the client names). Never passed to
  // subrequests.
  struct SloSegment {
    std::string name;  // "/container/object"
    int64_t bytes = 0;
    const common::http::HeaderMap* headers = nullptr;  // its HEAD answer's
  };
  std::function<std::vector<std::pair<std::string, std::string>>(
      const std::vector<SloSegment>& segments)>
      slo_manifest_hook;
  // swift.format_listing: false when a middleware answers a listing in its own format (object
  // versioning's ?versions), which listing_formats then passes on as it is.
  bool format_listing = true;
  // swift.callback.update_footers: called once an object PUT's body has been sent, to add
  // metadata that depends on it (the encryption middleware's etags and crypto meta). The proxy
  // then sends the body as Swift's MIME document with a footer, which the object servers store
  // with the object. A response refuses the PUT (nothing is committed). Never passed to
  // subrequests.
  std::function<std::optional<common::http::Response>(common::http::HeaderMap& footers)>
      update_footers;
  // swift.callback.fetch_crypto_keys, set by a keymaster for the filters after it.
  FetchCryptoKeys fetch_crypto_keys;
  // S3 server-side encryption (s3api/sse.h) as the keymaster applies it. A write's object key
  // comes from the named KMS key or from the client's own key (SSE-C) instead of the root
  // secrets; neither is passed on to subrequests.
  std::string sse_write_kms_key_id;
  std::string sse_write_customer_key;  // 32 raw bytes
  // An SSE-C key the client sent to read an object stored with it; passed on to subrequests
  // (an SLO's segments need it too).
  std::string sse_customer_key;
  // Where the encryption middleware says why it refused a request for the client's key:
  // "missing" (the object was stored with one), "mismatch" (another one), "kms-key" (no such
  // KMS key). Shared with subrequests, so that s3api hears of an SLO segment's refusal too;
  // null when nobody listens.
  std::shared_ptr<std::string> sse_refusal;
  // swift.crypto.override: the encryption middleware neither encrypts nor decrypts (a
  // middleware that moves stored bytes as they are).
  bool crypto_override = false;
};

// The headers of a cached info, read-only: an info is copied at every lookup (the caches hand
// out copies, requests keep them), and the copies share one map instead of each copying every
// header (a fifth of a 4 KiB GET's allocations in the proxy went to such copies).
class InfoHeaders {
 public:
  InfoHeaders() = default;
  InfoHeaders(common::http::HeaderMap map)  // NOLINT: implicit, as an info's headers are set
      : map_(std::make_shared<const common::http::HeaderMap>(std::move(map))) {}

  const common::http::HeaderMap& map() const { return map_ ? *map_ : kEmpty; }
  // NOLINTNEXTLINE: implicit, for whatever reads a HeaderMap.
  operator const common::http::HeaderMap&() const { return map(); }
  std::optional<std::string_view> get(std::string_view name) const { return map().get(name); }
  std::string_view get_or(std::string_view name, std::string_view fallback) const {
    return map().get_or(name, fallback);
  }
  bool contains(std::string_view name) const { return map().contains(name); }
  size_t size() const { return map().size(); }
  bool empty() const { return map().empty(); }
  const std::vector<common::http::HeaderMap::Field>& fields() const { return map().fields(); }
  auto begin() const { return map().begin(); }
  auto end() const { return map().end(); }
  // Change this info's headers only (on a copy of the map: for tests and builders).
  void set(std::string_view name, std::string_view value) {
    edit([&](common::http::HeaderMap& h) { h.set(name, value); });
  }
  void erase(std::string_view name) {
    edit([&](common::http::HeaderMap& h) { h.erase(name); });
  }

 private:
  template <class Change>
  void edit(Change change) {
    auto copy = std::make_shared<common::http::HeaderMap>(map());
    change(*copy);
    map_ = std::move(copy);
  }

  static inline const common::http::HeaderMap kEmpty{};
  std::shared_ptr<const common::http::HeaderMap> map_;
};

// What a cached HEAD of an account or container said (Swift's *_info dicts).
struct CachedInfo {
  int status = 0;  // 2xx when it exists; 404, or 0 when unknown (backend trouble)
  InfoHeaders headers;
  std::chrono::steady_clock::time_point expires;
};

// Account and container existence and metadata as a middleware asks for them (Swift's
// get_account_info() and get_container_info()): a HEAD to the backends, cached for
// recheck_*_existence (in memcached when env has it, shared by every proxy). The proxy app
// implements it; a middleware sees this and nothing else of the app.
class InfoLookup {
 public:
  virtual ~InfoLookup() = default;
  virtual boost::asio::awaitable<CachedInfo> account_info(const std::string& account,
                                                          const common::http::Request& req,
                                                          const ProxyEnv& env) = 0;
  virtual boost::asio::awaitable<CachedInfo> container_info(const std::string& account,
                                                            const std::string& container,
                                                            const common::http::Request& req,
                                                            const ProxyEnv& env) = 0;
  // Drops the cached info of an account, or of a container when `container` is not empty
  // (Swift's clear_info_cache()).
  virtual boost::asio::awaitable<void> forget_info(std::string account, std::string container,
                                                   const ProxyEnv& env) = 0;
};

// What a middleware is built with besides its own [filter:...] section: the cluster's
// swift.conf (constraints, policies), the directory of the config files, and info lookups.
struct MiddlewareContext {
  const common::SwiftConf& swift;
  const std::string& swift_dir;
  InfoLookup& info;
  // The proxy app's own section ([app:proxy-server] with [DEFAULT]), for the settings Swift
  // still reads from there when a filter's section lacks them (dlo's). Null: none (tests).
  const common::Section* app = nullptr;
  // The entry points of the pipeline's filters, in order (s3api serves multipart uploads only
  // when slo follows it, as Swift's check_pipeline).
  std::vector<std::string> pipeline{};
};

using Next = std::function<boost::asio::awaitable<void>(common::http::Exchange&, ProxyEnv&)>;

class Middleware {
 public:
  virtual ~Middleware() = default;
  // Handles the request, calling `next` to pass it on.
  virtual boost::asio::awaitable<void> call(common::http::Exchange& ex, ProxyEnv& env,
                                            const Next& next) = 0;
  // What the middleware adds to /info (name -> JSON object text), if anything.
  virtual std::optional<std::pair<std::string, std::string>> info() const { return std::nullopt; }
  // Every section the middleware adds to /info, in order: info()'s, or more than one (bulk
  // registers bulk_upload and bulk_delete).
  virtual std::vector<std::pair<std::string, std::string>> info_sections() const {
    if (auto section = info()) return {*section};
    return {};
  }
};

using common::http::ExchangeWrapper;

// An ExchangeWrapper that edits response headers (adds, removes) as the response goes out.
class HeaderEditor : public ExchangeWrapper {
 public:
  using Edit = std::function<void(int status, common::http::HeaderMap& headers)>;
  HeaderEditor(common::http::Exchange& inner, Edit edit)
      : ExchangeWrapper(inner), edit_(std::move(edit)) {}

 protected:
  boost::asio::awaitable<common::Status> do_respond(common::http::Response response) override {
    edit_(response.status, response.headers);
    return ExchangeWrapper::do_respond(std::move(response));
  }
  boost::asio::awaitable<common::Status> do_start_response(
      int status, common::http::HeaderMap headers, std::optional<uint64_t> length) override {
    edit_(status, headers);
    return ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  Edit edit_;
};

// An ExchangeWrapper that holds a whole answer instead of sending it, for a middleware that
// re-renders it (listing_formats, symlink's listing rewrite). At most `max_body` bytes of body
// are held: past that a write fails (Cancelled) and too_big is set, so a client's listing
// cannot grow the buffer beyond what the proxy reads of a listing at all.
class ResponseCapture final : public ExchangeWrapper {
 public:
  ResponseCapture(common::http::Exchange& inner, size_t max_body)
      : ExchangeWrapper(inner), max_body_(max_body) {}
  common::http::Response held;
  bool too_big = false;

  boost::asio::awaitable<common::Status> write_body(std::string_view chunk) override {
    if (held.body.size() + chunk.size() > max_body_) {
      too_big = true;
      co_return common::Status::cancelled("answer too large to hold");
    }
    held.body.append(chunk);
    co_return common::Status();
  }
  boost::asio::awaitable<common::Status> finish_response() override {
    co_return common::Status();
  }
  bool response_started() const override { return held.status != 0; }
  int response_status() const override { return held.status; }

 protected:
  boost::asio::awaitable<common::Status> do_respond(common::http::Response response) override {
    if (response.body.size() > max_body_) {
      too_big = true;
      co_return common::Status::cancelled("answer too large to hold");
    }
    held = std::move(response);
    co_return common::Status();
  }
  boost::asio::awaitable<common::Status> do_start_response(
      int status, common::http::HeaderMap headers, std::optional<uint64_t>) override {
    held.status = status;
    held.headers = std::move(headers);
    co_return common::Status();
  }

 private:
  size_t max_body_;
};

// A built pipeline: its middlewares in order, then the app.
class Pipeline {
 public:
  Pipeline(std::vector<std::unique_ptr<Middleware>> filters, Next app);
  // Runs a request through every filter and the app.
  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) const;
  const std::vector<std::unique_ptr<Middleware>>& filters() const { return filters_; }

 private:
  std::vector<std::unique_ptr<Middleware>> filters_;
  std::vector<Next> chain_;  // chain_[i] runs filters_[i..] and the app
};

}  // namespace apus::proxy
