#include "proxy/controllers/base.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/config/config.h"
#include "common/http/swob.h"
#include "common/timestamp.h"
#include "proxy/internal/app.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::istarts_with;
using common::http::swob_response;

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

net::awaitable<std::optional<Response>> authorize(const Request& req, ProxyEnv& env,
                                                  const std::optional<std::string>& acl) {
  if (!env.authorize) co_return std::nullopt;
  env.acl = acl;
  co_return co_await env.authorize(req, env);
}

NodeIter iter_nodes(ProxyApp& app, ring::Ring& ring, uint32_t part, NodeIter::Purpose purpose,
                    std::optional<int> policy) {
  const ProxyConfig& config = app.config();
  return NodeIter(ring, part, config.node_count(ring.replica_count()), app.health(),
                  config.order_for(policy), purpose,
                  config.log_handoffs ? &app : nullptr);
}

net::awaitable<Response> get_or_head(ProxyApp& app, ring::Ring& ring, uint32_t part,
                                     const std::string& method,
                                     const std::string& path_after_part, const HeaderMap& h) {
  NodeIter it = iter_nodes(app, ring, part);
  // X-Newest: every node is asked and the newest good answer wins (Swift's source_key).
  const bool newest = common::config_true_value(h.get_or("X-Newest", ""));
  std::vector<BackendResponse> answers;
  std::optional<BackendResponse> best;
  common::Timestamp best_time;
  NodeRef node;
  std::string path = "/" + std::to_string(part) + path_after_part;
  while (it.next(&node)) {
    BackendResponse a = co_await request_node(app.config().backend, app.health(), *node.device,
                                              method, path, h);
    a.from_primary = node.primary;
    if (a.status == 0 || a.status >= 500) continue;
    bool good = (a.status >= 200 && a.status < 400);
    // A database whose put timestamp is 0 is a stub that was never created here.
    if (good && a.headers.contains("X-Put-Timestamp") &&
        common::timestamp_or_zero(a.headers.get_or("X-Put-Timestamp", "0")) ==
            common::Timestamp()) {
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
    r.headers.set("Content-Type",
                  best->headers.get_or("Content-Type", "text/html; charset=UTF-8"));
    r.headers.set("Accept-Ranges", "bytes");  // Swift says so of every answer from a source
    co_return r;
  }
  Response r = best_response(answers, it.primary_count());
  co_return r;
}

std::optional<Response> refusal(const common::CheckResult& check) {
  if (check.ok()) return std::nullopt;
  return common::http::text_response(check.status, check.body);
}

void remove_owner_headers(HeaderMap& h) {
  static constexpr std::string_view kOwnerHeaders[] = {
      "x-container-read", "x-container-write", "x-container-sync-key", "x-container-sync-to",
      "x-account-meta-temp-url-key", "x-account-meta-temp-url-key-2",
      "x-container-meta-temp-url-key", "x-container-meta-temp-url-key-2",
      "x-account-access-control"};
  for (std::string_view name : kOwnerHeaders) h.erase(name);
}

// Only the fixed container removals (read and write ACLs, sync key and target, versions
// location; history location, which Swift's versioned_writes turns into a removal) and the
// meta ones: X-Remove-Account-Sysmeta-<k> must not let a client delete what only middlewares
// may write.
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

// ---- Controller ------------------------------------------------------------------------------

const ProxyConfig& Controller::config() const { return app_.config(); }

NodeHealth& Controller::health() { return app_.health(); }

net::awaitable<CachedInfo> Controller::account_info(const Request& req, const ProxyEnv& env) {
  co_return co_await app_.account_info(path_.account, req, env);
}

net::awaitable<CachedInfo> Controller::container_info(const Request& req, const ProxyEnv& env) {
  co_return co_await app_.container_info(path_.account, path_.container, req, env);
}

net::awaitable<void> Controller::forget_account_info(const ProxyEnv& env) {
  co_await app_.forget_info(path_.account, "", env);
}

net::awaitable<void> Controller::forget_container_info(const ProxyEnv& env) {
  co_await app_.forget_info(path_.account, path_.container, env);
}

bool Controller::allows(std::string_view allowed, std::string_view method) {
  for (const auto& m : common::list_from_csv(allowed)) {
    if (m == method) return true;
  }
  return false;
}

Response Controller::method_not_allowed(std::string_view allowed) {
  Response r = swob_response(405);
  r.headers.set("Allow", allowed);
  return r;
}

bool Controller::origin_allowed(const CachedInfo& container, std::string_view origin) const {
  std::vector<std::string> allowed = space_words(cors_meta(container, "Allow-Origin"));
  const ProxyConfig& c = config();
  allowed.insert(allowed.end(), c.cors_allow_origin.begin(), c.cors_allow_origin.end());
  return std::find(allowed.begin(), allowed.end(), origin) != allowed.end() ||
         std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
}

HeaderEditor::Edit Controller::cors_edit(CachedInfo container, std::string origin) const {
  return [this, container = std::move(container), origin = std::move(origin)](
             int, HeaderMap& h) { add_cors_headers(container, origin, h); };
}

void Controller::add_cors_headers(const CachedInfo& container, std::string_view origin,
                                  HeaderMap& h) const {
  if (config().strict_cors_mode && !origin_allowed(container, origin)) return;
  if (!h.contains("Access-Control-Expose-Headers")) {
    std::set<std::string> expose = {"cache-control", "content-language", "content-type",
                                    "expires", "last-modified", "pragma", "etag", "x-timestamp",
                                    "x-trans-id", "x-openstack-request-id"};
    for (const auto& e : config().cors_expose_headers) expose.insert(common::http::to_lower(e));
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

Response Controller::options_response(const Request& req, std::string_view allowed,
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

}  // namespace apus::proxy
