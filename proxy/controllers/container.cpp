#include "proxy/controllers/container.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "common/config/config.h"
#include "common/constraints.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "common/utf8.h"
#include "proxy/internal/app.h"
#include "proxy/shard_ranges.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::OrRefusal;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::istarts_with;
using common::http::swob_response;

namespace {

constexpr std::string_view kAllowed = "DELETE, GET, HEAD, OPTIONS, POST, PUT";
// With X-Backend-Allow-Private-Methods (an internal request's: gatekeeper drops X-Backend-*
// from clients), Swift's private UPDATE too: rows to merge, as SLO's async delete queues its
// segments for the expirer.
constexpr std::string_view kAllowedWithPrivate = "DELETE, GET, HEAD, OPTIONS, POST, PUT, UPDATE";
// An UPDATE body holds rows for one container; the container servers take 16 MiB at most.
constexpr size_t kMaxUpdateBody = 16 << 20;

// Swift's validate_container_params(), run by the proxy before a container GET: each listing
// parameter must be UTF-8 (400 text/plain naming the first, in Swift's order, that is not), and
// a numeric limit at most container_listing_limit (412).
std::optional<Response> bad_container_params(std::string_view query,
                                             const common::Constraints& c) {
  static constexpr std::string_view kParams[] = {"marker", "end_marker", "prefix", "delimiter",
                                                 "path", "format", "reverse", "states",
                                                 "includes"};
  for (std::string_view name : kParams) {
    auto value = common::http::query_param(query, name);
    if (value && !value->empty() && !common::check_utf8(*value, /*internal=*/true)) {
      return common::http::text_response(
          400, "\"" + std::string(name) + "\" parameter not valid UTF-8");
    }
  }
  auto limit = common::http::query_param(query, "limit");
  if (limit && !limit->empty() &&
      limit->find_first_not_of("0123456789") == std::string::npos &&
      (limit->size() > 18 || std::stoll(*limit) > c.container_listing_limit)) {
    return common::http::swob_response_with_body(
        412, "Maximum limit is " + std::to_string(c.container_listing_limit));
  }
  return std::nullopt;
}

std::string policy_name(const common::StoragePolicies& policies, std::string_view index) {
  const common::StoragePolicy* p = policies.by_index_string(index);
  return p ? p->name() : std::string();
}

// The client's headers of a container write, X-Remove-* applied, what only owners may set
// dropped for others, and (but for DELETE) the ACLs normalized and the metadata checked.
OrRefusal<HeaderMap> write_headers(const Request& req, const ProxyEnv& env,
                                   const common::Constraints& c) {
  HeaderMap client = req.headers;
  apply_removes(client, "container");
  if (!env.swift_owner) remove_owner_headers(client);  // only owners set ACLs and sync keys
  if (req.method == "DELETE") return client;
  if (env.clean_acl) {
    for (const char* header : {"X-Container-Read", "X-Container-Write"}) {
      if (auto v = client.get(header)) {
        auto cleaned = env.clean_acl(header, *v);
        if (!cleaned.ok()) {
          return common::http::swob_response_with_body(400, cleaned.status().message());
        }
        client.set(header, *cleaned);
      }
    }
  }
  if (auto bad = refusal(common::check_metadata(c, client, common::MetadataTarget::kContainer))) {
    return std::move(*bad);
  }
  return client;
}

std::optional<Response> bad_container_name(const std::string& container,
                                           const common::Constraints& c) {
  if (static_cast<int64_t>(container.size()) <= c.max_container_name_length) return std::nullopt;
  return common::http::swob_response_with_body(
      400, "Container name length of " + std::to_string(container.size()) + " longer than " +
               std::to_string(c.max_container_name_length));
}

// The policy a container PUT names in X-Storage-Policy (nullopt: none, the default), or 400
// for an unknown or deprecated one.
OrRefusal<std::optional<int>> requested_policy(const HeaderMap& client,
                                               const common::StoragePolicies& policies) {
  auto name = client.get("X-Storage-Policy");
  if (!name || name->empty()) return std::optional<int>();
  const common::StoragePolicy* policy = policies.by_name(*name);
  if (!policy) {
    return common::http::text_response(400,
                                       "Invalid X-Storage-Policy '" + std::string(*name) + "'");
  }
  if (policy->is_deprecated) {
    return common::http::swob_response_with_body(
        400, "Storage Policy '" + policy->name() + "' is deprecated");
  }
  return std::optional<int>(policy->index);
}

// The headers the container servers get for a write: the client's container headers, a new
// X-Timestamp, and for PUT the policy asked for (or the default, for the servers to apply).
HeaderMap backend_write_headers(const Request& req, const ProxyEnv& env, const HeaderMap& client,
                                std::optional<int> policy_index,
                                const common::StoragePolicies& policies) {
  HeaderMap h = backend_headers(req, env.trans_id);
  for (const auto& [k, v] : client) {
    if (istarts_with(k, "x-container-meta-") || istarts_with(k, "x-container-sysmeta-") ||
        iequals(k, "x-container-read") || iequals(k, "x-container-write") ||
        iequals(k, "x-container-sync-key") || iequals(k, "x-container-sync-to") ||
        iequals(k, "x-versions-location") || iequals(k, "x-history-location")) {
      h.set(k, v);
    }
  }
  h.set("X-Timestamp", Timestamp::now().internal());
  if (req.method == "PUT") {
    if (policy_index) {
      h.set("X-Backend-Storage-Policy-Index", std::to_string(*policy_index));
    } else {
      h.set("X-Backend-Storage-Policy-Default", std::to_string(policies.default_policy().index));
    }
  }
  return h;
}

// Whether an account's info says it exists: a 2xx that is not the empty listing a proxy makes
// up for a missing account under account_autocreate (Swift's account_really_exists, which
// Swift's proxies cache as such: a container PUT must then create the account first).
bool really_exists(const CachedInfo& account) {
  return account.status >= 200 && account.status < 300 &&
         !common::config_true_value(account.headers.get_or("X-Backend-Fake-Account-Listing", ""));
}

}  // namespace

net::awaitable<void> ContainerController::handle(Exchange& ex, ProxyEnv& env) {
  const Request& req = ex.request();
  const std::string_view allowed =
      common::config_true_value(req.headers.get_or("X-Backend-Allow-Private-Methods", ""))
          ? kAllowedWithPrivate
          : kAllowed;
  if (!allows(allowed, req.method)) co_return co_await ex.reply(method_not_allowed(allowed));
  auto origin = req.headers.get("Origin");
  if (req.method != "OPTIONS" && !origin) co_return co_await serve(ex, env);
  CachedInfo info = co_await container_info(req, env);
  if (req.method == "OPTIONS") co_return co_await ex.reply(options_response(req, kAllowed, &info));
  HeaderEditor cors(ex, cors_edit(std::move(info), std::string(*origin)));
  co_await serve(cors, env);
}

net::awaitable<void> ContainerController::serve(Exchange& ex, ProxyEnv& env) {
  const Request& req = ex.request();
  // Authorize now; a denial may still turn into an allow once the container's ACLs are known.
  std::optional<Response> early = co_await authorize(req, env, std::nullopt);
  const bool writes = req.method == "PUT" || req.method == "POST" || req.method == "DELETE" ||
                     req.method == "UPDATE";
  if (early && writes) co_return co_await ex.reply(std::move(*early));
  auto part = app().container_ring().get_part(path().account, path().container);
  if (!part.ok()) co_return co_await ex.reply(swob_response(500));
  if (req.method == "GET" || req.method == "HEAD") {
    co_await read(ex, env, *part, std::move(early));
  } else if (req.method == "UPDATE") {
    co_await update(ex, env, *part);
  } else {
    co_await write(ex, env, *part);
  }
}

net::awaitable<void> ContainerController::read(Exchange& ex, ProxyEnv& env, uint32_t part,
                                               std::optional<Response> early) {
  const Request& req = ex.request();
  if (req.method == "GET") {
    if (auto bad = bad_container_params(req.query(), config().swift.constraints)) {
      co_return co_await ex.reply(std::move(*bad));
    }
  }
  CachedInfo account = co_await account_info(req, env);
  // As Swift: the containers of an auto-created account (the daemons' queues: .expiring_objects,
  // .misplaced_objects) are read even before their account exists (its servers learn of them
  // only from the container updater).
  const bool auto_account =
      path().account.starts_with(config().swift.constraints.auto_create_account_prefix);
  if (!auto_account && !really_exists(account)) {
    if (early) co_return co_await ex.reply(std::move(*early));
    co_return co_await ex.reply(swob_response(account.status >= 500 ? 503 : 404));
  }
  HeaderMap h = backend_headers(req, env.trans_id);
  for (const auto& [k, v] : req.headers) h.set(k, v);
  h.set("X-Trans-Id", env.trans_id);
  std::string query(req.query());
  // As Swift's proxy: a sharded container (a Swift server's; Apus's never shard) answers
  // with the shard ranges that make up its listing, which are then read in turn. An internal
  // caller naming a record type gets what it asked for.
  std::string record_type(req.headers.get_or("X-Backend-Record-Type", ""));
  std::transform(record_type.begin(), record_type.end(), record_type.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (record_type.empty()) {
    record_type = "auto";
    h.set("X-Backend-Record-Type", "auto");
    query = common::http::with_query_param(query, "states", "listing");
  }
  const bool auto_record = record_type == "auto";
  std::string target = "/" + common::http::quote(path().account) + "/" +
                       common::http::quote(path().container) +
                       (query.empty() ? "" : "?" + query);
  Response r = co_await get_or_head(app(), app().container_ring(), part, req.method, target, h);
  if (req.method == "GET" && auto_record && r.status >= 200 && r.status < 300 &&
      iequals(r.headers.get_or("X-Backend-Record-Type", ""), "shard")) {
    ShardListing listing{{{path().account, path().container}}, 0, kMaxShardRequests};
    r = co_await listing_from_shards(req, h, std::move(r), listing);
  }
  if (early) {
    std::optional<std::string> acl;
    if (auto v = r.headers.get("X-Container-Read")) acl = std::string(*v);
    if (auto denied = co_await authorize(req, env, acl)) {
      co_return co_await ex.reply(std::move(*denied));
    }
  }
  if (r.status >= 200 && r.status < 300) {
    if (auto index = r.headers.get("X-Backend-Storage-Policy-Index")) {
      std::string name = policy_name(config().swift.policies, *index);
      if (!name.empty()) r.headers.set("X-Storage-Policy", name);
    }
  }
  if (!env.swift_owner) remove_owner_headers(r.headers);
  co_return co_await ex.reply(std::move(r));
}

net::awaitable<void> ContainerController::write(Exchange& ex, ProxyEnv& env, uint32_t part) {
  const Request& req = ex.request();
  const ProxyConfig& c = config();
  OrRefusal<HeaderMap> client = write_headers(req, env, c.swift.constraints);
  if (!client) co_return co_await ex.reply(std::move(client).refusal());
  std::optional<int> policy_index;
  if (req.method == "PUT") {
    if (auto bad = bad_container_name(path().container, c.swift.constraints)) {
      co_return co_await ex.reply(std::move(*bad));
    }
    OrRefusal<std::optional<int>> policy = requested_policy(*client, c.swift.policies);
    if (!policy) co_return co_await ex.reply(std::move(policy).refusal());
    policy_index = *policy;
  }
  OrRefusal<CachedInfo> account = co_await account_for_write(req, env);
  if (!account) co_return co_await ex.reply(std::move(account).refusal());
  if (auto over = co_await over_container_limit(req, env, *account)) {
    co_return co_await ex.reply(std::move(*over));
  }

  HeaderMap h = backend_write_headers(req, env, *client, policy_index, c.swift.policies);
  // Each container replica tells its share of the account replicas (Swift spreads them).
  ring::Ring& account_ring = app().account_ring();
  auto apart = account_ring.get_part(path().account);
  ring::NodeList account_nodes = account_ring.get_part_nodes(*apart);
  NodeIter it = iter_nodes(app(), app().container_ring(), part);
  const size_t n = it.primary_count();
  auto headers_for = [&](size_t i) {
    HeaderMap each = h;
    if (req.method == "POST") return each;
    std::string hosts, devices;
    for (size_t j = i; j < account_nodes.nodes.size(); j += std::max<size_t>(n, 1)) {
      const ring::Device& d = *account_nodes.nodes[j].device;
      hosts += (hosts.empty() ? "" : ",") + d.ip + ":" + std::to_string(d.port);
      devices += (devices.empty() ? "" : ",") + d.device;
    }
    if (!hosts.empty()) {
      each.set("X-Account-Partition", std::to_string(*apart));
      each.set("X-Account-Host", hosts);
      each.set("X-Account-Device", devices);
    }
    return each;
  };
  const std::string target =
      "/" + common::http::quote(path().account) + "/" + common::http::quote(path().container);
  co_await forget_account_info(env);
  co_await forget_container_info(env);
  auto answers = co_await make_requests(c.backend, health(), std::move(it), req.method, target,
                                        headers_for);
  Response r = best_response(answers, n);
  // Again: a read during the write may have cached the old state.
  co_await forget_account_info(env);
  co_await forget_container_info(env);
  if (req.method == "DELETE" && r.status == 202) r = swob_response(404);
  co_return co_await ex.reply(std::move(r));
}


net::awaitable<void> ContainerController::update(Exchange& ex, ProxyEnv& env, uint32_t part) {
  const Request& req = ex.request();
  // Swift takes the policy from the caller (an internal one) and fails without it.
  auto policy = req.headers.get("X-Backend-Storage-Policy-Index");
  if (!policy) co_return co_await ex.reply(swob_response(500));
  common::http::WholeBody read = co_await common::http::read_body_at_most(ex, kMaxUpdateBody);
  if (read.outcome == common::http::WholeBody::Outcome::kTooLarge) {
    co_return co_await ex.reply(swob_response(413));
  }
  if (read.outcome == common::http::WholeBody::Outcome::kFailed) {
    co_return co_await ex.reply(swob_response(499));
  }
  std::string body = std::move(read.bytes);
  HeaderMap h = backend_headers(req, env.trans_id);
  h.set("X-Timestamp", Timestamp::now().internal());
  h.set("X-Backend-Storage-Policy-Index", *policy);
  h.set("Content-Type", req.headers.get_or("Content-Type", "application/json"));
  NodeIter it = iter_nodes(app(), app().container_ring(), part);
  const size_t n = it.primary_count();
  const std::string target =
      "/" + common::http::quote(path().account) + "/" + common::http::quote(path().container);
  auto answers = co_await make_requests(config().backend, health(), std::move(it), "UPDATE",
                                        target, [&](size_t) { return h; }, body);
  co_await forget_container_info(env);
  co_return co_await ex.reply(best_response(answers, n));
}

namespace {

// Shards inside shards are followed this deep at most; deeper, a shard's own rows are listed
// (logged). Swift has no bound but its loop check.
constexpr int kMaxShardDepth = 8;

std::string listing_name(const boost::json::value& entry) {
  const boost::json::object* o = entry.if_object();
  if (!o) return {};
  for (const char* key : {"name", "subdir"}) {
    if (const boost::json::value* v = o->if_contains(key); v && v->is_string()) {
      return std::string(v->as_string());
    }
  }
  return {};
}

// What a container GET asked for, as _get_from_shards reads it.
struct ListingRequest {
  std::string query;
  int64_t limit = 0;  // the limit asked for, within container_listing_limit
  bool reverse = false;
  std::string marker, end_marker, prefix;
  bool constrained = false;  // marker, end_marker, path, prefix or delimiter given

  ListingRequest(std::string_view q, int64_t max_limit) : query(q), limit(max_limit) {
    auto param = [&](std::string_view name) {
      return common::http::query_param(query, name).value_or("");
    };
    const std::string given = param("limit");
    if (!given.empty() && given.size() <= 18 &&
        given.find_first_not_of("0123456789") == std::string::npos) {
      limit = std::min<int64_t>(std::stoll(given), max_limit);
    }
    reverse = common::config_true_value(param("reverse"));
    marker = param("marker");
    end_marker = param("end_marker");
    prefix = param("prefix");
    constrained = !marker.empty() || !end_marker.empty() || !param("path").empty() ||
                  !prefix.empty() || !param("delimiter").empty();
  }

  // A shard wholly outside the names the prefix covers has nothing to add.
  bool skips(const ShardRange& range) const {
    return !prefix.empty() &&
           (range.below(prefix) || range.above(common::increment_last_char(prefix)));
  }

  // The query for `range`'s part: from the last name listed so far (`after`, else the
  // caller's marker), so no name comes twice and names below the range (misplaced ones) still
  // come; held to the range by its end marker, so a misplaced name cannot hide the next
  // range's. `follow`: a sharded shard may answer with its own ranges (states=listing).
  std::string for_range(const ShardRange& range, int64_t left, const std::string& after,
                        bool follow) const {
    namespace h = common::http;
    std::string q = h::with_query_param(query, "limit", std::to_string(left));
    q = h::with_query_param(q, "marker", after.empty() ? marker : after);
    const std::string end = !end_marker.empty() && range.contains(end_marker) ? end_marker
                            : reverse                                         ? range.lower
                                                                              : range.end_marker();
    q = h::with_query_param(q, "end_marker", end);
    q = h::with_query_param(q, "format", "json");
    return follow ? h::with_query_param(q, "states", "listing")
                  : h::without_query_param(q, "states");
  }

  // Whether the listing is complete after `last` (the end marker passed).
  bool ends_at(const std::string& last) const {
    return !end_marker.empty() && (reverse ? end_marker >= last : end_marker <= last);
  }
};

// The root's answer with the gathered listing as its JSON body (Python's json.dumps of it);
// when every name is there, the counts are the listing's own rather than the root's (possibly
// older) totals, as Swift counts them.
Response with_listing(Response root, const std::vector<boost::json::value>& objects,
                      bool whole) {
  std::string body = "[";
  for (size_t i = 0; i < objects.size(); ++i) {
    if (i > 0) body += ", ";
    common::listing::append_python_json(body, objects[i]);
  }
  body += "]";
  root.body = std::move(body);
  root.headers.set("Content-Type", "application/json; charset=utf-8");
  root.headers.erase("Content-Length");
  if (whole) {
    int64_t bytes = 0;
    for (const auto& o : objects) {
      const boost::json::value* b = o.is_object() ? o.as_object().if_contains("bytes") : nullptr;
      if (b && b->is_int64()) bytes += b->as_int64();
    }
    root.headers.set("X-Container-Object-Count", std::to_string(objects.size()));
    root.headers.set("X-Container-Bytes-Used", std::to_string(bytes));
  }
  return root;
}

}  // namespace

net::awaitable<Response> ContainerController::listing_from_shards(const Request& req,
                                                                 const HeaderMap& headers,
                                                                 Response root,
                                                                 ShardListing& listing) {
  std::optional<std::vector<ShardRange>> ranges = parse_shard_ranges(root.body);
  if (!ranges) {
    APUS_LOG_ERROR("Failed to get shard ranges from " + std::string(req.target) +
                   ": not a shard range listing");
    co_return swob_response(500);
  }
  if (ranges->empty()) co_return root;  // nothing to follow: what the root said
  APUS_LOG_DEBUG("GET listing from " + std::to_string(ranges->size()) + " shards for: " +
                 std::string(req.target));
  // Every shard must list the root's policy (the root's own unless the caller named one).
  HeaderMap shard_headers = headers;
  shard_headers.erase("X-Backend-Record-Type");
  if (!shard_headers.contains("X-Backend-Storage-Policy-Index")) {
    shard_headers.set("X-Backend-Storage-Policy-Index",
                      root.headers.get_or("X-Backend-Storage-Policy-Index", "0"));
  }
  const std::string policy(shard_headers.get_or("X-Backend-Storage-Policy-Index", "0"));
  const ListingRequest asked(req.query(), config().swift.constraints.container_listing_limit);

  std::vector<boost::json::value> objects;
  int64_t left = asked.limit;
  for (const ShardRange& range : *ranges) {
    if (asked.skips(range)) continue;
    const bool visited = std::find(listing.history.begin(), listing.history.end(),
                                   std::make_pair(range.account(), range.container())) !=
                         listing.history.end();
    const bool follow = !visited && listing.depth + 1 < kMaxShardDepth;
    if (!visited && !follow) {
      APUS_LOG_ERROR("Shards nested deeper than " + std::to_string(kMaxShardDepth) + " under " +
                     std::string(req.path()) + ": listing " + range.name + "'s own rows");
    }
    if (listing.budget-- <= 0) {
      // Each range costs a request, and an empty one lists nothing: a root naming huge
      // numbers of (empty) ranges would keep this listing going for ever.
      APUS_LOG_ERROR("Aborting listing from shards of " + std::string(req.path()) +
                     ": more than " + std::to_string(kMaxShardRequests) + " shard requests");
      co_return swob_response(503);
    }
    const std::string query = asked.for_range(
        range, left, objects.empty() ? std::string() : listing_name(objects.back()), follow);
    Response shard = co_await shard_listing(req, shard_headers, range, query, follow, listing);
    if (shard.status < 200 || shard.status >= 300) {
      APUS_LOG_ERROR("Aborting listing from shards due to bad response: " +
                     std::to_string(shard.status) + " from " + range.name);
      co_return swob_response(503);
    }
    std::string_view shard_policy = shard.headers.get_or(
        "X-Backend-Record-Storage-Policy-Index",
        shard.headers.get_or("X-Backend-Storage-Policy-Index", ""));
    if (shard_policy != policy) {
      APUS_LOG_ERROR("Aborting listing from shards due to bad shard policy index: " +
                     std::string(shard_policy) + " (expected " + policy + ")");
      co_return swob_response(503);
    }
    boost::system::error_code ec;
    boost::json::value got = boost::json::parse(shard.body, ec);
    if (ec || !got.is_array()) {
      APUS_LOG_ERROR("Aborting listing from shards: " + range.name + " answered no JSON listing");
      co_return swob_response(503);
    }
    if (got.as_array().empty()) continue;  // an empty shard is fine
    for (boost::json::value& entry : got.as_array()) objects.push_back(std::move(entry));
    left -= static_cast<int64_t>(got.as_array().size());
    if (left <= 0 || asked.ends_at(listing_name(objects.back()))) break;
  }
  const bool whole = !asked.constrained && static_cast<int64_t>(objects.size()) < asked.limit;
  co_return with_listing(std::move(root), objects, whole);
}

net::awaitable<Response> ContainerController::shard_listing(const Request& req,
                                                            const HeaderMap& headers,
                                                            const ShardRange& range,
                                                            const std::string& query, bool follow,
                                                            ShardListing& listing) {
  HeaderMap h = headers;
  // Back at a container already read (a gap filled with itself, a shard shrunk into the
  // root): its own rows, or the listing would go round.
  h.set("X-Backend-Record-Type", follow ? "auto" : "object");
  auto part = app().container_ring().get_part(range.account(), range.container());
  if (!part.ok()) co_return swob_response(503);
  const std::string path =
      "/" + common::http::quote(range.account()) + "/" + common::http::quote(range.container());
  Response shard =
      co_await get_or_head(app(), app().container_ring(), *part, "GET", path + "?" + query, h);
  if (follow && shard.status >= 200 && shard.status < 300 &&
      iequals(shard.headers.get_or("X-Backend-Record-Type", ""), "shard")) {
    // The shard is sharded in turn: its own ranges, read the same way.
    listing.history.emplace_back(range.account(), range.container());
    ++listing.depth;
    Request sub = req;
    sub.target = "/v1" + path + "?" + query;
    shard = co_await listing_from_shards(sub, h, std::move(shard), listing);
    --listing.depth;
  }
  co_return shard;
}

net::awaitable<OrRefusal<CachedInfo>> ContainerController::account_for_write(
    const Request& req, const ProxyEnv& env) {
  CachedInfo account = co_await account_info(req, env);
  // Accounts of the auto-create prefix (".s3api_buckets") are made by the middleware that
  // uses them, on its pre-authorized requests only (Swift's servers make them the same way).
  const std::string& prefix = config().swift.constraints.auto_create_account_prefix;
  const bool internal_account = env.authorize_override && !prefix.empty() &&
                                path().account.starts_with(prefix);
  if (!really_exists(account) && account.status < 500 && account.status != 0 &&
      req.method == "PUT" && (config().account_autocreate || internal_account)) {
    ring::Ring& ring = app().account_ring();
    auto apart = ring.get_part(path().account);
    HeaderMap put = backend_headers(req, env.trans_id);
    put.set("X-Timestamp", Timestamp::now().internal());
    NodeIter nodes = iter_nodes(app(), ring, *apart);
    auto created = co_await make_requests(config().backend, health(), std::move(nodes), "PUT",
                                          "/" + common::http::quote(path().account),
                                          [&](size_t) { return put; });
    Response made = best_response(created, created.size());
    if (made.status < 200 || made.status >= 300) co_return swob_response(503);
    co_await forget_account_info(env);
    account = co_await account_info(req, env);
  }
  if (!really_exists(account)) {
    co_return swob_response(account.status >= 500 || account.status == 0 ? 503 : 404);
  }
  co_return account;
}

net::awaitable<std::optional<Response>> ContainerController::over_container_limit(
    const Request& req, const ProxyEnv& env, const CachedInfo& account) {
  const ProxyConfig& c = config();
  if (req.method != "PUT" || c.max_containers_per_account <= 0 ||
      std::find(c.max_containers_whitelist.begin(), c.max_containers_whitelist.end(),
                path().account) != c.max_containers_whitelist.end()) {
    co_return std::nullopt;
  }
  int64_t count =
      std::atoll(std::string(account.headers.get_or("X-Account-Container-Count", "0")).c_str());
  CachedInfo existing = co_await container_info(req, env);
  if (count >= c.max_containers_per_account && existing.status == 404) {
    co_return common::http::swob_response_with_body(
        403, "Reached container limit of " + std::to_string(c.max_containers_per_account));
  }
  co_return std::nullopt;
}

}  // namespace apus::proxy
