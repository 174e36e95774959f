// The proxy app: routing, account and container controllers, cached account/container info,
// /info. Object requests are in object_controller.cpp.
#include <algorithm>
#include <boost/json.hpp>
#include <set>
#include <cmath>

#include "common/constraints.h"
#include "common/hash_path.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "proxy/internal/app.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::Timestamp;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::istarts_with;
using common::http::swob_response;

namespace {

// Headers only an owner of the account may see or set (Swift's swift_owner_headers).
constexpr std::string_view kOwnerHeaders[] = {
    "x-container-read", "x-container-write", "x-container-sync-key", "x-container-sync-to",
    "x-account-meta-temp-url-key", "x-account-meta-temp-url-key-2",
    "x-container-meta-temp-url-key", "x-container-meta-temp-url-key-2",
    "x-account-access-control"};

void remove_owner_headers(HeaderMap& h) {
  for (std::string_view name : kOwnerHeaders) h.erase(name);
}


// Swift's transfer_headers(): X-Remove-<Type>-Meta-<k>, and for containers the few fixed
// removals Swift lists (read and write ACLs, sync key and target, versions location; history
// location, which Swift's versioned_writes turns into a removal), become the plain header with
// an empty value. No other X-Remove- header does: X-Remove-Account-Sysmeta-<k> must not let a
// client delete what only middlewares may write.
void apply_removes(HeaderMap& h, std::string_view type) {
  static constexpr std::string_view kContainerRemovals[] = {
      "x-remove-container-read", "x-remove-container-write", "x-remove-versions-location",
      "x-remove-container-sync-key", "x-remove-container-sync-to",
      "x-remove-history-location"};
  const std::string meta = "x-remove-" + std::string(type) + "-meta-";
  std::vector<std::string> names;
  for (const auto& [name, value] : h) {
    bool removal = istarts_with(name, meta);
    if (type == "container") {
      for (std::string_view fixed : kContainerRemovals) removal = removal || iequals(name, fixed);
    }
    if (removal) names.push_back(name);
  }
  for (const auto& name : names) {
    h.erase(name);
    h.set("X-" + name.substr(9), "");
  }
}

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

// Python's json.dumps(v, ensure_ascii=True, separators=(',', ':'), sort_keys=True).
void append_sorted_json(std::string& out, const boost::json::value& v) {
  if (v.is_object()) {
    std::vector<std::pair<std::string, const boost::json::value*>> items;
    for (const auto& [k, val] : v.as_object()) items.emplace_back(std::string(k), &val);
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out += "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ",";
      common::listing::append_json_string(out, items[i].first);
      out += ":";
      append_sorted_json(out, *items[i].second);
    }
    out += "}";
  } else if (v.is_array()) {
    out += "[";
    for (size_t i = 0; i < v.as_array().size(); ++i) {
      if (i) out += ",";
      append_sorted_json(out, v.as_array()[i]);
    }
    out += "]";
  } else if (v.is_string()) {
    common::listing::append_json_string(out, std::string(v.as_string()));
  } else {
    out += boost::json::serialize(v);
  }
}

// The X-Account-Access-Control an owner sees: the stored ACL, re-serialized as Swift's
// format_acl(version=2) does; nothing for an empty or unreadable one.
std::optional<std::string> format_account_acl(std::string_view stored) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(stored, ec);
  if (ec || !v.is_object() || v.as_object().empty()) return std::nullopt;
  std::string out;
  append_sorted_json(out, v);
  return out;
}

std::string policy_name(const common::StoragePolicies& policies, std::string_view index) {
  const common::StoragePolicy* p = policies.by_index_string(index);
  return p ? p->name() : std::string();
}

// Whether any node order sorts by timing (only then are timings worth recording).
bool sorts_by_timing(const ProxyConfig& c) {
  if (c.node_order.sort == NodeOrder::Sort::kTiming) return true;
  for (const auto& [policy, order] : c.policy_node_order) {
    if (order.sort == NodeOrder::Sort::kTiming) return true;
  }
  return false;
}

}  // namespace

// ---- construction and routing ----------------------------------------------------------------

ProxyApp::ProxyApp(ProxyConfig config, std::unique_ptr<ring::Ring> account_ring,
                   std::unique_ptr<ring::Ring> container_ring,
                   std::map<int, std::unique_ptr<ring::Ring>> object_rings)
    : config_(std::move(config)),
      account_ring_(std::move(account_ring)),
      container_ring_(std::move(container_ring)),
      object_rings_(std::move(object_rings)),
      health_(config_.error_suppression_limit, config_.error_suppression_interval,
              config_.timing_expiry, sorts_by_timing(config_)),
      info_cache_(config_.swift.policies) {}

ring::Ring* ProxyApp::object_ring(int policy) {
  auto it = object_rings_.find(policy);
  return it == object_rings_.end() ? nullptr : it->second.get();
}

NodeIter ProxyApp::nodes(ring::Ring& ring, uint32_t part, NodeIter::Purpose purpose,
                         std::optional<int> policy) {
  return NodeIter(ring, part, config_.node_count(ring.replica_count()), health_,
                  config_.order_for(policy), purpose);
}

net::awaitable<void> ProxyApp::handle(Exchange& ex, ProxyEnv& env) {
  const Request& req = ex.request();
  if (req.path() == "/info") {
    co_await info_request(ex);
    co_return;
  }
  std::string path = common::http::percent_decode(req.path());
  bool allow_reserved = common::config_true_value(
      req.headers.get_or("X-Backend-Allow-Reserved-Names", ""));
  if (!common::check_utf8(path, allow_reserved)) {
    (void)co_await ex.respond(common::http::swob_response_with_body(412, "Invalid UTF8 or contains NULL"));
    co_return;
  }
  auto segs = common::http::split_path(path, 1, 4, true);
  if (!segs.ok()) {
    (void)co_await ex.respond(swob_response(404));
    co_return;
  }
  ApiPath p;
  p.version = (*segs)[0].value_or("");
  p.account = (*segs)[1].value_or("");
  p.container = (*segs)[2].value_or("");
  p.object = (*segs)[3].value_or("");
  if (p.account.empty()) {
    (void)co_await ex.respond(common::http::swob_response_with_body(412, "Bad URL"));
    co_return;
  }
  if (!common::valid_api_version(config_.swift.constraints, p.version)) {
    (void)co_await ex.respond(swob_response(400));
    co_return;
  }
  if (!p.object.empty()) {
    co_await object_request(ex, env, p);
  } else if (!p.container.empty()) {
    co_await container_request(ex, env, p);
  } else {
    co_await account_request(ex, env, p);
  }
}

net::awaitable<std::optional<Response>> authorize(const Request& req, ProxyEnv& env,
                                                  const std::optional<std::string>& acl) {
  if (!env.authorize) co_return std::nullopt;
  env.acl = acl;
  co_return co_await env.authorize(req, env);
}

// ---- backend reads ---------------------------------------------------------------------------

net::awaitable<Response> ProxyApp::get_or_head(ring::Ring& ring, uint32_t part,
                                               const std::string& method,
                                               const std::string& path_after_part,
                                               const HeaderMap& h) {
  NodeIter it = nodes(ring, part);
  // X-Newest: every node is asked and the newest good answer wins (Swift's source_key).
  const bool newest = common::config_true_value(h.get_or("X-Newest", ""));
  std::vector<BackendResponse> answers;
  std::optional<BackendResponse> best;
  common::Timestamp best_time;
  NodeRef node;
  std::string path = "/" + std::to_string(part) + path_after_part;
  while (it.next(&node)) {
    BackendResponse a = co_await request_node(config_.backend, health_, *node.device, method,
                                              path, h);
    a.from_primary = node.primary;
    if (a.status == 0 || a.status >= 500) continue;
    bool good = (a.status >= 200 && a.status < 400);
    // A database whose put timestamp is 0 is a stub that was never created here.
    if (good && a.headers.contains("X-Put-Timestamp") &&
        common::timestamp_or_zero(a.headers.get_or("X-Put-Timestamp", "0")) == common::Timestamp()) {
      a = BackendResponse{.status = 404, .from_primary = node.primary};
      good = false;
    }
    if (!good) {
      answers.push_back(std::move(a));
      continue;
    }
    common::Timestamp t = source_timestamp(a.headers);
    if (!best || t >= best_time) {
      best_time = t;
      best = std::move(a);
    }
    if (!newest) break;
  }
  if (best) {
    std::vector<BackendResponse> one{*best};
    Response r = best_response(one, 1);
    r.headers.set("Content-Type", best->headers.get_or("Content-Type", "text/html; charset=UTF-8"));
    r.headers.set("Accept-Ranges", "bytes");  // Swift says so of every answer from a source
    co_return r;
  }
  Response r = best_response(answers, it.primary_count());
  co_return r;
}

net::awaitable<CachedInfo> ProxyApp::cached_head(const std::string& account,
                                                 const std::string& container,
                                                 const Request& req, const ProxyEnv& env) {
  const InfoKind kind = container.empty() ? InfoKind::kAccount : InfoKind::kContainer;
  std::string key = container.empty() ? "account/" + account : "container/" + account + "/" + container;
  if (auto hit = co_await info_cache_.get(key, kind, env.memcache)) co_return std::move(*hit);
  ring::Ring& ring = container.empty() ? *account_ring_ : *container_ring_;
  auto part = ring.get_part(account, container);
  CachedInfo info;
  if (!part.ok()) co_return info;
  HeaderMap h = backend_headers(req, env.trans_id);
  std::string path = "/" + common::http::quote(account);
  if (!container.empty()) path += "/" + common::http::quote(container);
  Response r = co_await get_or_head(ring, *part, "HEAD", path, h);
  info.status = r.status;
  info.headers = std::move(r.headers);
  co_await info_cache_.set(std::move(key), kind, info,
                           container.empty() ? config_.recheck_account_existence
                                             : config_.recheck_container_existence,
                           env.memcache);
  co_return info;
}

net::awaitable<CachedInfo> ProxyApp::account_info(const std::string& account, const Request& req,
                                                  const ProxyEnv& env) {
  // A coroutine, not a plain function returning cached_head(): the empty container name must
  // live until cached_head is done with it.
  co_return co_await cached_head(account, std::string(), req, env);
}

net::awaitable<CachedInfo> ProxyApp::container_info(const std::string& account,
                                                    const std::string& container,
                                                    const Request& req, const ProxyEnv& env) {
  // A container exists only in an account that exists.
  CachedInfo a = co_await account_info(account, req, env);
  if (a.status < 200 || a.status >= 300) {
    if (!(a.status == 404 && config_.account_autocreate)) {
      CachedInfo none;
      none.status = a.status >= 500 || a.status == 0 ? 503 : 404;
      co_return none;
    }
  }
  co_return co_await cached_head(account, container, req, env);
}

net::awaitable<void> ProxyApp::forget_info(std::string account, std::string container,
                                           const ProxyEnv& env) {
  co_await info_cache_.forget(
      container.empty() ? "account/" + account : "container/" + account + "/" + container,
      env.memcache);
}

// ---- accounts --------------------------------------------------------------------------------

net::awaitable<void> ProxyApp::account_request(Exchange& ex, ProxyEnv& env, const ApiPath& p) {
  const Request& req = ex.request();
  const auto& c = config_.swift.constraints;
  std::vector<std::string> allowed = {"GET", "HEAD", "OPTIONS", "POST"};
  if (config_.allow_account_management) allowed = {"DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"};
  if (std::find(allowed.begin(), allowed.end(), req.method) == allowed.end()) {
    Response r = swob_response(405);
    std::string joined;
    for (const auto& m : allowed) joined += (joined.empty() ? "" : ", ") + m;
    r.headers.set("Allow", joined);
    (void)co_await ex.respond(std::move(r));
    co_return;
  }
  if (req.method == "OPTIONS") {
    std::string joined;
    for (const auto& m : allowed) joined += (joined.empty() ? "" : ", ") + m;
    (void)co_await ex.respond(options_response(req, joined, nullptr));
    co_return;
  }
  if (auto denied = co_await authorize(req, env, std::nullopt)) {
    (void)co_await ex.respond(std::move(*denied));
    co_return;
  }
  if (static_cast<int64_t>(p.account.size()) > c.max_account_name_length) {
    (void)co_await ex.respond(common::http::swob_response_with_body(
        400, "Account name length of " + std::to_string(p.account.size()) + " longer than " +
                 std::to_string(c.max_account_name_length)));
    co_return;
  }
  auto part = account_ring_->get_part(p.account);
  if (!part.ok()) {
    (void)co_await ex.respond(swob_response(500));
    co_return;
  }
  std::string path = "/" + common::http::quote(p.account);
  HeaderMap base = backend_headers(req, env.trans_id);

  if (req.method == "GET" || req.method == "HEAD") {
    HeaderMap h = base;
    for (const auto& [k, v] : req.headers) h.set(k, v);
    h.set("X-Trans-Id", env.trans_id);
    std::string query(req.query());
    Response r = co_await get_or_head(*account_ring_, *part, req.method,
                                      path + (query.empty() ? "" : "?" + query), h);
    if (r.status == 404) {
      if (common::http::to_lower(r.headers.get_or("X-Account-Status", "")) == "deleted") {
        r.status = 410;
        r.body = swob_response(410).body;
      } else if (config_.account_autocreate) {
        // A fake, empty account (Swift's account_listing_response with a FakeAccountBroker).
        std::string now = Timestamp::now().normal();
        r = Response();
        r.status = 200;
        r.headers.set("X-Account-Container-Count", "0");
        r.headers.set("X-Account-Object-Count", "0");
        r.headers.set("X-Account-Bytes-Used", "0");
        r.headers.set("X-Timestamp", now);
        r.headers.set("X-PUT-Timestamp", now);
        r.headers.set("Content-Type", "application/json; charset=utf-8");
        r.headers.set("X-Backend-Fake-Account-Listing", "yes");
        r.body = "[]";
      }
    }
    if (!env.swift_owner) {
      remove_owner_headers(r.headers);
    } else if (auto acl = r.headers.get("X-Account-Sysmeta-Core-Access-Control")) {
      if (auto shown = format_account_acl(*acl)) r.headers.set("X-Account-Access-Control", *shown);
    }
    (void)co_await ex.respond(std::move(r));
    co_return;
  }

  if (req.method == "DELETE" && !req.query().empty()) {
    (void)co_await ex.respond(common::http::swob_response_with_body(400, "The account DELETE cannot take a query string"));
    co_return;
  }
  HeaderMap client = req.headers;
  apply_removes(client, "account");
  if (!env.swift_owner) remove_owner_headers(client);
  for (const auto& [k, v] : env.add_headers) client.set(k, v);
  auto meta_check = common::check_metadata(c, client, common::MetadataTarget::kAccount);
  if (!meta_check.ok()) {
    (void)co_await ex.respond(common::http::text_response(meta_check.status, meta_check.body));
    co_return;
  }
  HeaderMap h = base;
  for (const auto& [k, v] : client) {
    if (istarts_with(k, "x-account-meta-") || istarts_with(k, "x-account-sysmeta-")) h.set(k, v);
  }
  h.set("X-Timestamp", Timestamp::now().internal());
  co_await forget_info(p.account, "", env);
  NodeIter it = nodes(*account_ring_, *part);
  auto answers = co_await make_requests(config_.backend, health_, std::move(it), req.method, path,
                                        [&](size_t) { return h; });
  Response r = best_response(answers, answers.size());
  co_await forget_info(p.account, "", env);  // again: a read during the write may have cached the old state
  if (req.method == "POST" && r.status == 404 && config_.account_autocreate) {
    // Swift creates the account, then posts again.
    HeaderMap put = base;
    put.set("X-Timestamp", Timestamp::now().internal());
    NodeIter put_nodes = nodes(*account_ring_, *part);
    auto created = co_await make_requests(config_.backend, health_, std::move(put_nodes), "PUT", path,
                                          [&](size_t) { return put; });
    (void)created;
    h.set("X-Timestamp", Timestamp::now().internal());
    NodeIter again = nodes(*account_ring_, *part);
    answers = co_await make_requests(config_.backend, health_, std::move(again), "POST", path,
                                     [&](size_t) { return h; });
    r = best_response(answers, answers.size());
  }
  (void)co_await ex.respond(std::move(r));
}

// ---- containers ------------------------------------------------------------------------------

net::awaitable<void> ProxyApp::container_request(Exchange& ex, ProxyEnv& env, const ApiPath& p) {
  const Request& req = ex.request();
  static const std::vector<std::string> kAllowed = {"DELETE", "GET", "HEAD", "OPTIONS", "POST",
                                                    "PUT"};
  if (std::find(kAllowed.begin(), kAllowed.end(), req.method) == kAllowed.end()) {
    Response r = swob_response(405);
    r.headers.set("Allow", "DELETE, GET, HEAD, OPTIONS, POST, PUT");
    (void)co_await ex.respond(std::move(r));
    co_return;
  }
  auto origin = req.headers.get("Origin");
  if (req.method == "OPTIONS" || origin) {
    CachedInfo info = co_await container_info(p.account, p.container, req, env);
    if (req.method == "OPTIONS") {
      (void)co_await ex.respond(
          options_response(req, "DELETE, GET, HEAD, OPTIONS, POST, PUT", &info));
      co_return;
    }
    std::string from(*origin);
    HeaderEditor cors(ex, [this, info, from](int, HeaderMap& h) { add_cors_headers(info, from, h); });
    co_await container_request_inner(cors, env, p);
    co_return;
  }
  co_await container_request_inner(ex, env, p);
}

net::awaitable<void> ProxyApp::container_request_inner(Exchange& ex, ProxyEnv& env,
                                                       const ApiPath& p) {
  const Request& req = ex.request();
  const auto& c = config_.swift.constraints;
  // Authorize now; a denial may still turn into an allow once the container's ACLs are known.
  std::optional<Response> early = co_await authorize(req, env, std::nullopt);
  bool writes = req.method == "PUT" || req.method == "POST" || req.method == "DELETE";
  if (early && writes) {
    (void)co_await ex.respond(std::move(*early));
    co_return;
  }
  auto part = container_ring_->get_part(p.account, p.container);
  if (!part.ok()) {
    (void)co_await ex.respond(swob_response(500));
    co_return;
  }
  std::string path = "/" + common::http::quote(p.account) + "/" + common::http::quote(p.container);
  HeaderMap base = backend_headers(req, env.trans_id);

  if (req.method == "GET" || req.method == "HEAD") {
    if (req.method == "GET") {
      if (auto bad = bad_container_params(req.query(), c)) {
        (void)co_await ex.respond(std::move(*bad));
        co_return;
      }
    }
    CachedInfo account = co_await account_info(p.account, req, env);
    if (account.status < 200 || account.status >= 300) {
      if (early) {
        (void)co_await ex.respond(std::move(*early));
      } else {
        (void)co_await ex.respond(swob_response(account.status >= 500 ? 503 : 404));
      }
      co_return;
    }
    HeaderMap h = base;
    for (const auto& [k, v] : req.headers) h.set(k, v);
    h.set("X-Trans-Id", env.trans_id);
    std::string query(req.query());
    Response r = co_await get_or_head(*container_ring_, *part, req.method,
                                      path + (query.empty() ? "" : "?" + query), h);
    if (early) {
      std::optional<std::string> acl;
      if (auto v = r.headers.get("X-Container-Read")) acl = std::string(*v);
      if (auto denied = co_await authorize(req, env, acl)) {
        (void)co_await ex.respond(std::move(*denied));
        co_return;
      }
    }
    if (r.status >= 200 && r.status < 300) {
      if (auto index = r.headers.get("X-Backend-Storage-Policy-Index")) {
        std::string name = policy_name(config_.swift.policies, *index);
        if (!name.empty()) r.headers.set("X-Storage-Policy", name);
      }
    }
    if (!env.swift_owner) remove_owner_headers(r.headers);
    (void)co_await ex.respond(std::move(r));
    co_return;
  }

  // PUT, POST, DELETE.
  HeaderMap client = req.headers;
  apply_removes(client, "container");
  if (!env.swift_owner) remove_owner_headers(client);  // only owners set ACLs and sync keys
  if (req.method != "DELETE") {
    if (env.clean_acl) {
      for (const char* header : {"X-Container-Read", "X-Container-Write"}) {
        if (auto v = client.get(header)) {
          auto cleaned = env.clean_acl(header, *v);
          if (!cleaned.ok()) {
            (void)co_await ex.respond(common::http::swob_response_with_body(400, cleaned.status().message()));
            co_return;
          }
          client.set(header, *cleaned);
        }
      }
    }
    auto meta_check = common::check_metadata(c, client, common::MetadataTarget::kContainer);
    if (!meta_check.ok()) {
      (void)co_await ex.respond(common::http::text_response(meta_check.status, meta_check.body));
      co_return;
    }
  }
  if (req.method == "PUT" &&
      static_cast<int64_t>(p.container.size()) > c.max_container_name_length) {
    (void)co_await ex.respond(common::http::swob_response_with_body(
        400, "Container name length of " + std::to_string(p.container.size()) +
                 " longer than " + std::to_string(c.max_container_name_length)));
    co_return;
  }
  std::optional<int> policy_index;
  if (req.method == "PUT") {
    if (auto name = client.get("X-Storage-Policy"); name && !name->empty()) {
      const common::StoragePolicy* policy = config_.swift.policies.by_name(*name);
      if (!policy) {
        (void)co_await ex.respond(
            common::http::text_response(400, "Invalid X-Storage-Policy '" + std::string(*name) + "'"));
        co_return;
      }
      if (policy->is_deprecated) {
        (void)co_await ex.respond(
            common::http::swob_response_with_body(400, "Storage Policy '" + policy->name() + "' is deprecated"));
        co_return;
      }
      policy_index = policy->index;
    }
  }

  CachedInfo account = co_await account_info(p.account, req, env);
  if (account.status == 404 && req.method == "PUT" && config_.account_autocreate) {
    auto apart = account_ring_->get_part(p.account);
    HeaderMap put = base;
    put.set("X-Timestamp", Timestamp::now().internal());
    NodeIter an = nodes(*account_ring_, *apart);
    auto created = co_await make_requests(config_.backend, health_, std::move(an), "PUT",
                                          "/" + common::http::quote(p.account),
                                          [&](size_t) { return put; });
    Response made = best_response(created, created.size());
    if (made.status < 200 || made.status >= 300) {
      (void)co_await ex.respond(swob_response(503));
      co_return;
    }
    co_await forget_info(p.account, "", env);
    account = co_await account_info(p.account, req, env);
  }
  if (account.status < 200 || account.status >= 300) {
    (void)co_await ex.respond(swob_response(account.status >= 500 || account.status == 0 ? 503 : 404));
    co_return;
  }
  if (req.method == "PUT" && config_.max_containers_per_account > 0 &&
      std::find(config_.max_containers_whitelist.begin(), config_.max_containers_whitelist.end(),
                p.account) == config_.max_containers_whitelist.end()) {
    int64_t count = std::atoll(
        std::string(account.headers.get_or("X-Account-Container-Count", "0")).c_str());
    CachedInfo existing = co_await container_info(p.account, p.container, req, env);
    if (count >= config_.max_containers_per_account && existing.status == 404) {
      (void)co_await ex.respond(common::http::swob_response_with_body(
          403, "Reached container limit of " + std::to_string(config_.max_containers_per_account)));
      co_return;
    }
  }

  HeaderMap h = base;
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
      h.set("X-Backend-Storage-Policy-Default",
            std::to_string(config_.swift.policies.default_policy().index));
    }
  }
  // Each container replica tells its share of the account replicas (Swift spreads them).
  auto apart = account_ring_->get_part(p.account);
  ring::NodeList account_nodes = account_ring_->get_part_nodes(*apart);
  NodeIter it = nodes(*container_ring_, *part);
  size_t n = it.primary_count();
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
  co_await forget_info(p.account, "", env);
  co_await forget_info(p.account, p.container, env);
  auto answers = co_await make_requests(config_.backend, health_, std::move(it), req.method, path,
                                        headers_for);
  Response r = best_response(answers, n);
  co_await forget_info(p.account, "", env);  // again: a read during the write may have cached the old state
  co_await forget_info(p.account, p.container, env);
  if (req.method == "DELETE" && r.status == 202) r = swob_response(404);
  (void)co_await ex.respond(std::move(r));
}

// ---- CORS ------------------------------------------------------------------------------------

namespace {

std::vector<std::string> space_words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view cors_meta(const CachedInfo& c, std::string_view what) {
  std::string name = "X-Container-Meta-Access-Control-" + std::string(what);
  return c.headers.get_or(name, "");
}

void add_vary(HeaderMap& h, std::string_view what) {
  if (auto v = h.get("Vary"); v && !v->empty()) {
    h.set("Vary", std::string(*v) + ", " + std::string(what));
  } else {
    h.set("Vary", what);
  }
}

}  // namespace

bool ProxyApp::origin_allowed(const CachedInfo& container, std::string_view origin) const {
  std::vector<std::string> allowed = space_words(cors_meta(container, "Allow-Origin"));
  allowed.insert(allowed.end(), config_.cors_allow_origin.begin(), config_.cors_allow_origin.end());
  return std::find(allowed.begin(), allowed.end(), origin) != allowed.end() ||
         std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
}

void ProxyApp::add_cors_headers(const CachedInfo& container, std::string_view origin,
                                HeaderMap& h) const {
  if (config_.strict_cors_mode && !origin_allowed(container, origin)) return;
  if (!h.contains("Access-Control-Expose-Headers")) {
    std::set<std::string> expose = {"cache-control", "content-language", "content-type",
                                    "expires", "last-modified", "pragma", "etag", "x-timestamp",
                                    "x-trans-id", "x-openstack-request-id"};
    for (const auto& e : config_.cors_expose_headers) expose.insert(common::http::to_lower(e));
    for (const auto& [name, value] : h) {
      if (istarts_with(name, "x-container-meta") || istarts_with(name, "x-object-meta")) {
        expose.insert(common::http::to_lower(name));
      }
    }
    for (const auto& e : space_words(cors_meta(container, "Expose-Headers"))) {
      expose.insert(common::http::to_lower(e));
    }
    std::string joined;
    for (const auto& e : expose) joined += (joined.empty() ? "" : ", ") + e;
    h.set("Access-Control-Expose-Headers", joined);
  }
  if (!h.contains("Access-Control-Allow-Origin")) {
    std::string_view allow = cors_meta(container, "Allow-Origin");
    if (!allow.empty() && space_words(allow) == std::vector<std::string>{"*"}) {
      h.set("Access-Control-Allow-Origin", "*");
    } else {
      h.set("Access-Control-Allow-Origin", origin);
      add_vary(h, "Origin");
    }
  }
}

Response ProxyApp::options_response(const Request& req, std::string_view allowed,
                                    const CachedInfo* container) const {
  Response r;
  r.status = 200;
  r.headers.set("Content-Type", "text/html; charset=UTF-8");
  r.headers.set("Allow", allowed);
  auto origin = req.headers.get("Origin");
  if (!origin || !container) return r;
  std::string method(req.headers.get_or("Access-Control-Request-Method", ""));
  bool method_ok = false;
  for (const auto& m : common::list_from_csv(allowed)) method_ok = method_ok || m == method;
  if (!origin_allowed(*container, *origin) || !method_ok) {
    r.status = 401;
    return r;
  }
  std::string_view allow = cors_meta(*container, "Allow-Origin");
  if (!allow.empty() && space_words(allow) == std::vector<std::string>{"*"}) {
    r.headers.set("Access-Control-Allow-Origin", "*");
  } else {
    r.headers.set("Access-Control-Allow-Origin", *origin);
    add_vary(r.headers, "Origin");
  }
  if (auto max_age = container->headers.get("X-Container-Meta-Access-Control-Max-Age")) {
    r.headers.set("Access-Control-Max-Age", *max_age);
  }
  r.headers.set("Access-Control-Allow-Methods", allowed);
  auto wanted = common::list_from_csv(req.headers.get_or("Access-Control-Request-Headers", ""));
  if (!wanted.empty()) {
    std::string joined;
    for (const auto& w : wanted) joined += (joined.empty() ? "" : ", ") + w;
    r.headers.set("Access-Control-Allow-Headers", joined);
    add_vary(r.headers, "Access-Control-Request-Headers");
  }
  return r;
}

// ---- /info -----------------------------------------------------------------------------------

std::string ProxyApp::swift_info_json() const {
  const auto& c = config_.swift.constraints;
  boost::json::object swift;
  swift["version"] = APUS_SWIFT_VERSION;
  swift["strict_cors_mode"] = true;
  boost::json::array policies;
  for (const common::StoragePolicy* p : config_.swift.policies.visible()) {
    boost::json::object o;
    o["name"] = p->name();
    o["aliases"] = p->aliases();
    if (p->is_default) o["default"] = true;
    policies.push_back(std::move(o));
  }
  swift["policies"] = std::move(policies);
  swift["allow_account_management"] = config_.allow_account_management;
  swift["account_autocreate"] = config_.account_autocreate;
  swift["allow_open_expired"] = false;
  swift["max_file_size"] = c.max_file_size;
  swift["max_meta_name_length"] = c.max_meta_name_length;
  swift["max_meta_value_length"] = c.max_meta_value_length;
  swift["max_meta_count"] = c.max_meta_count;
  swift["max_meta_overall_size"] = c.max_meta_overall_size;
  swift["max_header_size"] = c.max_header_size;
  swift["max_object_name_length"] = c.max_object_name_length;
  swift["container_listing_limit"] = c.container_listing_limit;
  swift["account_listing_limit"] = c.account_listing_limit;
  swift["max_account_name_length"] = c.max_account_name_length;
  swift["max_container_name_length"] = c.max_container_name_length;
  swift["extra_header_count"] = c.extra_header_count;
  std::string out = "{\"swift\": " + boost::json::serialize(swift);
  for (const auto& [name, json] : middleware_info_) out += ", \"" + name + "\": " + json;
  out += "}";
  return out;
}

net::awaitable<void> ProxyApp::info_request(Exchange& ex) {
  const Request& req = ex.request();
  if (req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS") {
    Response r = swob_response(405);
    r.headers.set("Allow", "GET, HEAD, OPTIONS");
    (void)co_await ex.respond(std::move(r));
    co_return;
  }
  if (!config_.expose_info) {
    (void)co_await ex.respond(swob_response(403));
    co_return;
  }
  Response r;
  r.status = 200;
  r.headers.set("Content-Type", "application/json; charset=UTF-8");
  r.body = swift_info_json();
  (void)co_await ex.respond(std::move(r));
}

}  // namespace apus::proxy
