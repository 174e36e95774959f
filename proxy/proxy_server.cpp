#include "proxy/proxy_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/constraints.h"
#include "common/http/server_config.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "proxy/controllers/account.h"
#include "proxy/controllers/container.h"
#include "proxy/controllers/info.h"
#include "proxy/controllers/object.h"
#include "proxy/internal/app.h"
#include "proxy/middleware.h"
#include "ring/ring_reloader.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;

Result<ProxyConfig> ProxyConfig::from_config(const common::Config& conf) {
  ProxyConfig c;
  std::string app = "proxy-server";
  auto pipeline = conf.pipeline();
  if (!pipeline.ok()) return pipeline.status();
  app = pipeline->back();
  common::Section s = conf.section("app:" + app);
  c.app_section = s;
  c.server.server_type = "proxy-server";
  c.server.bind_ip = s.get_string("bind_ip", "0.0.0.0");
  int64_t port = 8080;
  APUS_ASSIGN_OR_RETURN(port, s.get_int("bind_port", 8080));
  c.server.bind_port = static_cast<uint16_t>(port);
  int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  if (s.get_string("workers", "auto") != "auto") APUS_ASSIGN_OR_RETURN(workers, s.get_int("workers", workers));
  c.server.workers = static_cast<int>(std::max<int64_t>(1, workers));
  APUS_ASSIGN_OR_RETURN(c.server.client_timeout, s.get_double("client_timeout", 60));
  APUS_RETURN_IF_ERROR(common::http::read_runtime_options(s, &c.server));
  APUS_ASSIGN_OR_RETURN(c.server.reuse_port, s.get_bool("reuse_port", false));
  int64_t backlog = 4096;
  APUS_ASSIGN_OR_RETURN(backlog, s.get_int("backlog", 4096));
  c.server.backlog = static_cast<int>(backlog);
  c.server.builtin_healthcheck = false;  // the healthcheck middleware answers it, if configured

  c.swift_dir = s.get_string("swift_dir", "/etc/swift");
  auto swift = common::load_swift_conf(c.swift_dir + "/swift.conf");
  if (!swift.ok()) return swift.status();
  c.swift = std::move(*swift);
  c.backend.max_body = max_listing_body(c.swift.constraints);
  APUS_ASSIGN_OR_RETURN(c.backend.conn_timeout, s.get_double("conn_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.backend.node_timeout, s.get_double("node_timeout", 10));
  APUS_ASSIGN_OR_RETURN(c.backend.post_quorum_timeout, s.get_double("post_quorum_timeout", 0.5));
  APUS_ASSIGN_OR_RETURN(c.recoverable_node_timeout,
                        s.get_double("recoverable_node_timeout", c.backend.node_timeout));
  APUS_ASSIGN_OR_RETURN(c.rebalance_missing_suppression_count,
                        s.get_int("rebalance_missing_suppression_count", 1));
  if (c.rebalance_missing_suppression_count < 0) {
    return s.invalid("rebalance_missing_suppression_count", "must not be negative");
  }
  APUS_ASSIGN_OR_RETURN(c.allow_account_management, s.get_bool("allow_account_management", false));
  APUS_ASSIGN_OR_RETURN(c.account_autocreate, s.get_bool("account_autocreate", false));
  APUS_ASSIGN_OR_RETURN(c.max_containers_per_account, s.get_int("max_containers_per_account", 0));
  c.max_containers_whitelist = s.get_list("max_containers_whitelist", "");
  int64_t chunk = 65536;
  APUS_ASSIGN_OR_RETURN(chunk, s.get_int("client_chunk_size", 65536));
  c.client_chunk_size = static_cast<size_t>(std::max<int64_t>(4096, chunk));
  APUS_ASSIGN_OR_RETURN(chunk, s.get_int("object_chunk_size", 65536));
  c.object_chunk_size = static_cast<size_t>(std::max<int64_t>(4096, chunk));
  APUS_ASSIGN_OR_RETURN(chunk, s.get_int("put_queue_depth", 10));
  c.put_queue_depth = static_cast<size_t>(std::max<int64_t>(1, chunk));
  int64_t limit = 10;
  APUS_ASSIGN_OR_RETURN(limit, s.get_int("error_suppression_limit", 10));
  c.error_suppression_limit = static_cast<int>(limit);
  APUS_ASSIGN_OR_RETURN(c.error_suppression_interval,
                        s.get_double("error_suppression_interval", 60));
  APUS_ASSIGN_OR_RETURN(c.node_order, NodeOrder::from_config(s, NodeOrder{}));
  APUS_ASSIGN_OR_RETURN(c.timing_expiry, s.get_double("timing_expiry", 300));
  // Per-policy overrides, as Swift's [proxy-server:policy:<index>] sections.
  const std::string policy_prefix = app + ":policy:";
  for (const std::string& name : conf.sections()) {
    if (name.rfind(policy_prefix, 0) != 0) continue;
    std::string index = name.substr(policy_prefix.size());
    common::Section ps = conf.section(name);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos ||
        index.size() > 9) {
      return Status::invalid_argument("[" + name + "]: override config must refer to a policy "
                                      "index");
    }
    int idx = std::stoi(index);
    if (!c.swift.policies.by_index(idx)) {
      return Status::invalid_argument("[" + name + "]: no policy found for override config, "
                                      "index: " + index);
    }
    APUS_ASSIGN_OR_RETURN(c.policy_node_order[idx], NodeOrder::from_config(ps, c.node_order));
  }
  APUS_ASSIGN_OR_RETURN(c.recheck_account_existence, s.get_double("recheck_account_existence", 60));
  APUS_ASSIGN_OR_RETURN(c.recheck_container_existence,
                        s.get_double("recheck_container_existence", 60));
  APUS_ASSIGN_OR_RETURN(c.local_info_cache_ttl, s.get_double("local_info_cache_ttl", 1.0));
  if (c.local_info_cache_ttl < 0) {
    return Status::invalid_argument("local_info_cache_ttl must be 0 or more");
  }
  APUS_ASSIGN_OR_RETURN(c.recheck_updating_shard_ranges,
                        s.get_double("recheck_updating_shard_ranges", 3600));
  APUS_ASSIGN_OR_RETURN(c.expose_info, s.get_bool("expose_info", true));
  c.request_node_count = s.get_string("request_node_count", "2 * replicas");
  APUS_ASSIGN_OR_RETURN(c.log_handoffs, s.get_bool("log_handoffs", true));
  APUS_ASSIGN_OR_RETURN(c.strict_cors_mode, s.get_bool("strict_cors_mode", true));
  c.cors_allow_origin = s.get_list("cors_allow_origin", "");
  c.cors_expose_headers = s.get_list("cors_expose_headers", "");
  c.log_name = s.get_string("log_name", "proxy-server");
  // Swift's proxy: the deprecated app option wins over swift.conf's prefix; an empty value
  // counts as unset.
  std::string prefix = s.get_string("auto_create_account_prefix", "");
  if (prefix.empty()) prefix = c.swift.constraints.auto_create_account_prefix;
  std::string queue_name = s.get_string("expiring_objects_account_name", "");
  c.expiring_objects_account = prefix + (queue_name.empty() ? "expiring_objects" : queue_name);
  if (!s.get_string("expiring_objects_container_divisor", "").empty()) {
    APUS_ASSIGN_OR_RETURN(c.expiring_objects_container_divisor,
                          s.get_int("expiring_objects_container_divisor", 86400));
    if (c.expiring_objects_container_divisor <= 0) {
      return s.invalid("expiring_objects_container_divisor", "must be a positive integer");
    }
  }
  return c;
}

size_t ProxyConfig::node_count(double replicas) const {
  // "N" or "N * replicas", as Swift reads request_node_count.
  std::string v = request_node_count;
  size_t star = v.find('*');
  double n = std::atof(v.c_str());
  if (star != std::string::npos) n *= replicas;
  return static_cast<size_t>(std::max(1.0, std::ceil(n)));
}

const NodeOrder& ProxyConfig::order_for(std::optional<int> policy) const {
  if (policy) {
    auto it = policy_node_order.find(*policy);
    if (it != policy_node_order.end()) return it->second;
  }
  return node_order;
}

Result<std::unique_ptr<ProxyServer>> ProxyServer::create(const common::Config& conf,
                                                         Options options) {
  auto config = ProxyConfig::from_config(conf);
  if (!config.ok()) return config.status();
  common::HashPathConfig hash{config->swift.hash_path_prefix, config->swift.hash_path_suffix};
  // Rings reload on the shared RingReloader's thread, never in lookups on the event loops.
  ring::RingOptions ring_options;
  ring_options.reloader = ring::RingReloader::shared();
  auto open_ring = [&](const std::string& name) {
    return ring::Ring::open(config->swift_dir + "/" + name + ".ring.gz", hash, ring_options);
  };
  auto account = open_ring("account");
  if (!account.ok()) return account.status();
  auto container = open_ring("container");
  if (!container.ok()) return container.status();
  std::map<int, std::unique_ptr<ring::Ring>> objects;
  for (const auto& policy : config->swift.policies.all()) {
    auto r = open_ring(policy.policy_string("object"));
    if (!r.ok()) return r.status();
    objects[policy.index] = std::move(*r);
  }
  std::unique_ptr<ProxyServer> server(new ProxyServer());
  auto statsd = common::StatsdClient::from_section(config->app_section, "proxy-server");
  if (!statsd.ok()) return statsd.status();
  server->app_ = std::make_unique<ProxyApp>(std::move(*config), std::move(*account),
                                            std::move(*container), std::move(objects));
  server->app_->set_statsd(std::move(*statsd));
  auto names = conf.pipeline();
  std::vector<PipelineEntry> entries;
  for (size_t i = 0; i + 1 < names->size(); ++i) {
    auto entry = conf.entry_point((*names)[i]);
    if (!entry.ok()) return entry.status();
    entries.push_back(PipelineEntry{(*names)[i], *entry});
  }
  std::vector<std::unique_ptr<Middleware>> filters;
  std::vector<std::pair<std::string, std::string>> info;
  const std::vector<PipelineEntry> pipeline =
      options.modify_pipeline ? with_required_filters(std::move(entries)) : std::move(entries);
  MiddlewareContext context = server->app_->middleware_context();
  for (const PipelineEntry& e : pipeline) context.pipeline.push_back(e.entry_point);
  if (pipeline.size() + 1 != names->size()) {
    std::string shown;
    for (const PipelineEntry& e : pipeline) shown += e.name + " ";
    APUS_LOG_INFO("Pipeline was modified. New pipeline is \"" + shown + names->back() + "\".");
  }
  for (const PipelineEntry& e : pipeline) {
    if (e.inserted && !has_middleware(e.entry_point)) {
      // Swift would insert it; Apus has no such middleware yet. A stock config still starts.
      APUS_LOG_WARNING("Required filter " + e.entry_point +
                       " would be added to the pipeline, but Apus does not implement it");
      continue;
    }
    if (e.inserted) APUS_LOG_INFO("Adding required filter " + e.entry_point + " to pipeline");
    // An inserted filter has no section of its own: Swift builds it from [DEFAULT] alone.
    auto mw = make_middleware(e.entry_point,
                              conf.section(e.inserted ? "DEFAULT" : "filter:" + e.name),
                              context);
    if (!mw.ok()) return mw.status();
    for (auto& section : (*mw)->info_sections()) info.push_back(std::move(section));
    filters.push_back(std::move(*mw));
  }
  auto app_entry = conf.entry_point(names->back());
  if (!app_entry.ok()) return app_entry.status();
  if (*app_entry != "proxy") {
    return Status::invalid_argument("the last element of [pipeline:main] must be the proxy app "
                                    "(egg:swift#proxy), not egg:swift#" + *app_entry);
  }
  if (std::any_of(info.begin(), info.end(), [](const auto& s) { return s.first == "object_versioning"; }) &&
      std::none_of(info.begin(), info.end(), [](const auto& s) { return s.first == "symlink"; })) {
    return Status::invalid_argument("object versioning requires symlinks");  // as Swift's check
  }
  server->trans_id_from_pipeline_ =
      !pipeline.empty() && pipeline.front().entry_point == "catch_errors";
  ProxyApp* app = server->app_.get();
  server->pipeline_ = std::make_unique<Pipeline>(
      std::move(filters), [app](common::http::Exchange& ex, ProxyEnv& env) {
        return app->handle(ex, env);
      });
  app->set_info_sources(&server->pipeline_->filters());
  return server;
}

ProxyServer::~ProxyServer() = default;

const ProxyConfig& ProxyServer::config() const { return app_->config(); }

net::awaitable<void> ProxyServer::handle(common::http::Exchange& ex) {
  ProxyEnv env;
  env.start_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A pipeline that starts with catch_errors gets its transaction id there (with the suffix),
  // before anything reads it; making one here too would cost a getrandom(2) per request.
  if (!trans_id_from_pipeline_) env.trans_id = generate_trans_id("");
  env.info_memo = std::make_shared<RequestInfoMemo>();
  // Whatever the pipeline holds, what a client may not say is gone before any middleware sees
  // the request (the copy is made only for the rare request that says it).
  if (!has_client_forbidden_headers(ex.request().headers)) {
    co_await pipeline_->handle(ex, env);
    co_return;
  }
  common::http::ExchangeWrapper cleaned(ex);
  env.inbound_x_timestamp = strip_client_headers(cleaned.mutable_request().headers);
  co_await pipeline_->handle(cleaned, env);
}

net::awaitable<void> ProxyServer::handle_internal(common::http::Exchange& ex, ProxyEnv& env) {
  if (!env.info_memo) env.info_memo = std::make_shared<RequestInfoMemo>();
  co_await pipeline_->handle(ex, env);
}

// ---- ProxyApp --------------------------------------------------------------------------------

namespace {

// Whether any node order sorts by timing (only then are timings worth recording).
bool sorts_by_timing(const ProxyConfig& c) {
  if (c.node_order.sort == NodeOrder::Sort::kTiming) return true;
  for (const auto& [policy, order] : c.policy_node_order) {
    if (order.sort == NodeOrder::Sort::kTiming) return true;
  }
  return false;
}

// The parts of the request's path, or the refusal: 412 for a path that is not UTF-8 (or holds
// a NUL without X-Backend-Allow-Reserved-Names) or names no account, 404 for one that is not
// /<version>/<account>[/<container>[/<object>]], 400 for an unknown version.
common::http::OrRefusal<ApiPath> parse_api_path(const common::http::Request& req,
                                               const common::Constraints& c) {
  std::string path = common::http::percent_decode(req.path());
  bool allow_reserved = common::config_true_value(
      req.headers.get_or("X-Backend-Allow-Reserved-Names", ""));
  if (!common::check_utf8(path, allow_reserved)) {
    return common::http::swob_response_with_body(412, "Invalid UTF8 or contains NULL");
  }
  auto segs = common::http::split_path(path, 1, 4, true);
  if (!segs.ok()) return common::http::swob_response(404);
  ApiPath p;
  p.version = (*segs)[0].value_or("");
  p.account = (*segs)[1].value_or("");
  p.container = (*segs)[2].value_or("");
  p.object = (*segs)[3].value_or("");
  if (p.account.empty()) return common::http::swob_response_with_body(412, "Bad URL");
  if (!common::valid_api_version(c, p.version)) return common::http::swob_response(400);
  return p;
}

}  // namespace

ProxyApp::ProxyApp(ProxyConfig config, std::unique_ptr<ring::Ring> account_ring,
                   std::unique_ptr<ring::Ring> container_ring,
                   std::map<int, std::unique_ptr<ring::Ring>> object_rings)
    : config_(std::move(config)),
      account_ring_(std::move(account_ring)),
      container_ring_(std::move(container_ring)),
      object_rings_(std::move(object_rings)),
      health_(config_.error_suppression_limit, config_.error_suppression_interval,
              config_.timing_expiry, sorts_by_timing(config_)),
      info_cache_(config_.swift.policies, InfoCache::kDefaultMaxEntries,
                  config_.local_info_cache_ttl) {}

void ProxyApp::extra_handoff(size_t handoffs, bool all_primaries) {
  count("handoff_count");
  APUS_LOG_WARNING("Handoff requested (" + std::to_string(handoffs) + ")");
  if (all_primaries) count("handoff_all_count");
}

ring::Ring* ProxyApp::object_ring(int policy) {
  auto it = object_rings_.find(policy);
  return it == object_rings_.end() ? nullptr : it->second.get();
}

net::awaitable<void> ProxyApp::handle(common::http::Exchange& ex, ProxyEnv& env) {
  if (ex.request().path() == "/info") {
    InfoController controller(*this);
    co_return co_await controller.handle(ex, env);
  }
  common::http::OrRefusal<ApiPath> p = parse_api_path(ex.request(), config_.swift.constraints);
  if (!p) {
    count("errors");  // a path Swift's proxy cannot route
    co_return co_await ex.reply(std::move(p).refusal());
  }
  if (!p->object.empty()) {
    ObjectController controller(*this, std::move(*p));
    co_await controller.handle(ex, env);
  } else if (!p->container.empty()) {
    ContainerController controller(*this, std::move(*p));
    co_await controller.handle(ex, env);
  } else {
    AccountController controller(*this, std::move(*p));
    co_await controller.handle(ex, env);
  }
}

net::awaitable<CachedInfo> ProxyApp::cached_head(const std::string& account,
                                                 const std::string& container,
                                                 const common::http::Request& req,
                                                 const ProxyEnv& env) {
  const InfoKind kind = container.empty() ? InfoKind::kAccount : InfoKind::kContainer;
  std::string key =
      container.empty() ? "account/" + account : "container/" + account + "/" + container;
  if (env.info_memo) {
    if (auto hit = env.info_memo->find(key)) co_return std::move(*hit);
  }
  if (auto hit = co_await info_cache_.get(key, kind, env.memcache)) {
    if (env.info_memo) env.info_memo->put(key, *hit);
    co_return std::move(*hit);
  }
  ring::Ring& ring = container.empty() ? *account_ring_ : *container_ring_;
  auto part = ring.get_part(account, container);
  CachedInfo info;
  if (!part.ok()) co_return info;
  common::http::HeaderMap h = backend_headers(req, env.trans_id);
  // As Swift's get-info requests: always, so that hidden (versions) containers have info too.
  h.set("X-Backend-Allow-Reserved-Names", "true");
  std::string path = "/" + common::http::quote(account);
  if (!container.empty()) path += "/" + common::http::quote(container);
  common::http::Response r = co_await get_or_head(*this, ring, *part, "HEAD", path, h);
  info.status = r.status;
  info.headers = std::move(r.headers);
  if (env.info_memo) env.info_memo->put(key, info);
  co_await info_cache_.set(std::move(key), kind, info,
                           container.empty() ? config_.recheck_account_existence
                                             : config_.recheck_container_existence,
                           env.memcache);
  co_return info;
}

net::awaitable<CachedInfo> ProxyApp::account_info(const std::string& account,
                                                  const common::http::Request& req,
                                                  const ProxyEnv& env) {
  // A coroutine, not a plain function returning cached_head(): the empty container name must
  // live until cached_head is done with it.
  co_return co_await cached_head(account, std::string(), req, env);
}

net::awaitable<CachedInfo> ProxyApp::container_info(const std::string& account,
                                                    const std::string& container,
                                                    const common::http::Request& req,
                                                    const ProxyEnv& env) {
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
  std::string key =
      container.empty() ? "account/" + account : "container/" + account + "/" + container;
  if (env.info_memo) env.info_memo->forget(key);
  co_await info_cache_.forget(std::move(key), env.memcache);
}

}  // namespace apus::proxy
