// The pipeline and the small middlewares: catch_errors, gatekeeper, healthcheck,
// proxy_logging, cache, listing_formats, crossdomain, ratelimit. tempauth is in tempauth.cpp.
#include "proxy/middleware.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <random>

#include "common/constraints.h"
#include "common/crypto/random.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/pickle.h"
#include "common/statsd.h"
#include "common/timestamp.h"
#include "proxy/access_log.h"
#include "proxy/bulk.h"
#include "proxy/container_sync.h"
#include "proxy/dlo.h"
#include "proxy/encryption.h"
#include "proxy/formpost.h"
#include "proxy/limits.h"
#include "proxy/backend.h"
#include "proxy/memcache.h"
#include "proxy/slo.h"
#include "proxy/staticweb.h"
#include "proxy/s3api/s3api.h"
#include "proxy/symlink.h"
#include "proxy/tempurl.h"
#include "proxy/versioned_writes.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;
using common::http::istarts_with;
using common::http::swob_response;

// ---- the pipeline ----------------------------------------------------------------------------

Pipeline::Pipeline(std::vector<std::unique_ptr<Middleware>> filters, Next app)
    : filters_(std::move(filters)) {
  chain_.resize(filters_.size() + 1);
  chain_[filters_.size()] = std::move(app);
  for (size_t i = filters_.size(); i-- > 0;) {
    Middleware* mw = filters_[i].get();
    const Next* rest = &chain_[i + 1];
    chain_[i] = [mw, rest](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, *rest); };
  }
}

net::awaitable<void> Pipeline::handle(Exchange& ex, ProxyEnv& env) const {
  return chain_[0](ex, env);
}

std::string generate_trans_id(std::string_view suffix) {
  // From the kernel's CSPRNG, as Swift takes uuid4().hex[:21]: ids are shown to clients and
  // must not reveal a generator state that predicts other requests' ids.
  char when[16];
  std::snprintf(when, sizeof when, "-%010llx",
                static_cast<unsigned long long>(std::time(nullptr)));
  std::string id;
  id.reserve(2 + 21 + 11 + suffix.size());
  id.append("tx").append(common::crypto::request_uuid4_hex(), 0, 21).append(when).append(suffix);
  return id;
}

// ---- what clients may not send ---------------------------------------------------------------

namespace {

// A header name's byte as Swift's WSGI server hands it on: lower case, '_' read as '-'.
char wsgi_char(char c) {
  if (c >= 'A' && c <= 'Z') return static_cast<char>(c - 'A' + 'a');
  return c == '_' ? '-' : c;
}

// Whether `name` is X-Timestamp as a WSGI server reads it (any case, '_' for '-').
bool is_x_timestamp(std::string_view name) {
  constexpr std::string_view kName = "x-timestamp";
  return name.size() == kName.size() &&
         std::equal(name.begin(), name.end(), kName.begin(),
                    [](char c, char k) { return wsgi_char(c) == k; });
}

}  // namespace

bool is_internal_header(std::string_view name) {
  if (name.empty() || (name[0] != 'x' && name[0] != 'X')) return false;  // most headers
  // The name as Swift's WSGI server hands it on (lower case, '_' read as '-'), as far as any
  // rule below reads it: asked of every header of every request and answer, so on the stack.
  constexpr size_t kLongestRule = 40;  // "x-remove-object-transient-sysmeta-" and the like
  char buf[kLongestRule + 1];
  const size_t len = std::min(name.size(), sizeof buf);
  std::transform(name.begin(), name.begin() + static_cast<ptrdiff_t>(len), buf, wsgi_char);
  const bool whole = len == name.size();  // else longer than any exact name below
  std::string_view v(buf, len);
  if (v.starts_with("x-remove-")) {
    v.remove_prefix(std::string_view("x-remove").size());
  } else if (v.starts_with("x-")) {
    v.remove_prefix(1);
  } else {
    return false;
  }
  // v is now "-<rest>" for X-<rest> and X-Remove-<rest> alike.
  static constexpr std::string_view kPrefixes[] = {
      "-backend", "-account-sysmeta-", "-container-sysmeta-", "-object-sysmeta-",
      "-object-transient-sysmeta-"};
  for (std::string_view p : kPrefixes) {
    if (v.starts_with(p)) return true;
  }
  // The update headers proxies send storage servers, older than X-Backend-* (Swift 2.30.1 as
  // Debian patches it against CVE-2026-50221).
  static constexpr std::string_view kUpdateHeaders[] = {
      "-account-host", "-account-device", "-account-partition",
      "-container-host", "-container-device", "-container-partition",
      "-container-root-db-state", "-delete-at-host", "-delete-at-device",
      "-delete-at-partition", "-delete-at-container"};
  for (std::string_view h : kUpdateHeaders) {
    if (whole && v == h) return true;
  }
  return false;
}

bool has_client_forbidden_headers(const HeaderMap& h) {
  return std::any_of(h.begin(), h.end(), [](const HeaderMap::Field& f) {
    return is_internal_header(f.first) || is_x_timestamp(f.first);
  });
}

std::optional<std::string> strip_client_headers(HeaderMap& h) {
  std::optional<std::string> timestamp;
  if (auto ts = h.get("X-Timestamp")) timestamp = std::string(*ts);
  std::vector<std::string> drop;
  for (const auto& [name, value] : h) {
    if (is_internal_header(name) || is_x_timestamp(name)) drop.push_back(name);
  }
  for (const auto& name : drop) h.erase(name);
  return timestamp;
}

// ---- required filters ------------------------------------------------------------------------

std::vector<PipelineEntry> with_required_filters(std::vector<PipelineEntry> filters) {
  auto index = [&](std::string_view entry) -> std::optional<size_t> {
    for (size_t i = 0; i < filters.size(); ++i) {
      if (filters[i].entry_point == entry) return i;
    }
    return std::nullopt;
  };
  // Swift's required_filters: each with the filters it goes right after (the last of those
  // present), else at the front. Swift walks the list backwards.
  struct Required {
    std::string_view name;
    std::vector<std::string_view> after;
  };
  const Required kRequired[] = {
      {"catch_errors", {}},
      {"gatekeeper", {}},  // after catch_errors only when the pipeline starts with it (below)
      {"listing_formats", {"catch_errors", "gatekeeper", "proxy_logging", "memcache"}},
      {"copy", {"staticweb", "tempauth", "keystoneauth", "catch_errors", "gatekeeper",
                "proxy_logging"}},
      {"dlo", {"copy", "staticweb", "tempauth", "keystoneauth", "catch_errors", "gatekeeper",
               "proxy_logging"}},
      {"versioned_writes", {"slo", "dlo", "copy", "staticweb", "tempauth", "keystoneauth",
                            "catch_errors", "gatekeeper", "proxy_logging"}},
  };
  for (auto it = std::rbegin(kRequired); it != std::rend(kRequired); ++it) {
    if (index(it->name)) continue;
    // gatekeeper's rule looks at the pipeline as it is when gatekeeper's turn comes.
    std::vector<std::string_view> after = it->after;
    if (it->name == "gatekeeper" && !filters.empty() &&
        filters.front().entry_point == "catch_errors") {
      after.push_back("catch_errors");
    }
    size_t at = 0;
    for (std::string_view a : after) {
      if (auto i = index(a)) at = std::max(at, *i + 1);
    }
    filters.insert(filters.begin() + static_cast<std::ptrdiff_t>(at),
                   PipelineEntry{std::string(it->name), std::string(it->name), true});
  }
  return filters;
}

namespace {

// ---- catch_errors: the transaction id, and a 500 for anything that answered nothing --------

// swob's www_authenticate() realm: the account of /<version>/<account>[/...], else "unknown".
std::string auth_realm(const Request& req) {
  auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 3, true);
  if (!segs.ok()) return "unknown";
  std::string realm = (*segs)[1].value_or("unknown");
  if (realm == "v1.0" || realm == "auth") return "unknown";
  return common::http::quote(realm);
}

class CatchErrors final : public Middleware {
 public:
  explicit CatchErrors(std::string suffix) : suffix_(std::move(suffix)) {}
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    std::string suffix = suffix_;
    if (auto extra = ex.request().headers.get("X-Trans-Id-Extra")) {
      suffix += "-" + common::http::quote(extra->substr(0, 32));
    }
    env.trans_id = generate_trans_id(suffix);
    std::string id = env.trans_id;
    HeaderEditor out(ex, [id, &ex](int status, HeaderMap& h) {
      h.set("X-Trans-Id", id);
      h.set("X-Openstack-Request-Id", id);
      // swob gives every 401 a challenge naming the account (of the request as it came: `ex`
      // outlives this editor).
      if (status == 401 && !h.contains("Www-Authenticate")) {
        h.set("Www-Authenticate", "Swift realm=\"" + auth_realm(ex.request()) + "\"");
      }
    });
    // The id travels in env (backend requests take it from there), not in the request, as in
    // Swift (swift.trans_id): a request copy per request saved.
    co_await next(out, env);
    if (!out.response_started()) {
      Response r = swob_response(500);
      r.body = "An error occurred";
      co_return co_await out.reply(std::move(r));
    }
  }

 private:
  std::string suffix_;
};

// ---- gatekeeper: backend and sysmeta headers never cross the proxy's edge -------------------

void strip_internal(HeaderMap& h) {
  std::vector<std::string> drop;
  for (const auto& [name, value] : h) {
    if (is_internal_header(name)) drop.push_back(name);
  }
  for (const auto& name : drop) h.erase(name);
}

// Options: allow_reserved_names_header (Swift's; default off) lets a client's
// X-Allow-Reserved-Names through as X-Backend-Allow-Reserved-Names. Swift's
// shunt_inbound_x_timestamp is always on here: no client chooses a write's timestamp.
class Gatekeeper final : public Middleware {
 public:
  explicit Gatekeeper(bool allow_reserved_names_header)
      : allow_reserved_names_header_(allow_reserved_names_header) {}
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    HeaderEditor out(ex, [](int, HeaderMap& h) { strip_internal(h); });
    // The request is copied only to change it (most clients send nothing to take off).
    if (needs_edit(ex.request().headers, env)) edit(out.mutable_request().headers, env);
    co_await next(out, env);
  }

 private:
  // Whether edit() would change anything: keep the two in step.
  bool needs_edit(const HeaderMap& h, const ProxyEnv& env) const {
    return env.inbound_x_timestamp || has_client_forbidden_headers(h) ||
           (allow_reserved_names_header_ && h.contains("X-Allow-Reserved-Names"));
  }

  void edit(HeaderMap& h, ProxyEnv& env) const {
    strip_internal(h);
    // shunt_inbound_x_timestamp (Swift's default): a client's X-Timestamp is kept aside, never
    // used as the write's timestamp. The server took it off the request before the pipeline;
    // one here came from a middleware ahead of this one.
    std::optional<std::string> inbound = std::move(env.inbound_x_timestamp);
    if (auto ts = h.get("X-Timestamp")) {
      inbound = std::string(*ts);
      h.erase("X-Timestamp");
    }
    if (inbound) h.set("X-Backend-Inbound-X-Timestamp", *inbound);
    if (auto allow = h.get("X-Allow-Reserved-Names"); allow && allow_reserved_names_header_) {
      std::string value(*allow);
      h.erase("X-Allow-Reserved-Names");
      h.set("X-Backend-Allow-Reserved-Names", value);
    }
  }

  const bool allow_reserved_names_header_;
};

// ---- healthcheck -----------------------------------------------------------------------------

class Healthcheck final : public Middleware {
 public:
  explicit Healthcheck(std::string disable_path) : disable_path_(std::move(disable_path)) {}
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (ex.request().path() != "/healthcheck") {
      co_await next(ex, env);
      co_return;
    }
    struct stat st;
    bool disabled = !disable_path_.empty() && ::stat(disable_path_.c_str(), &st) == 0;
    Response r;
    r.status = disabled ? 503 : 200;
    r.headers.set("Content-Type", "text/plain");
    r.body = disabled ? "DISABLED BY FILE" : "OK";
    co_return co_await ex.reply(std::move(r));
  }

 private:
  std::string disable_path_;
};

// ---- proxy_logging: Swift's proxy access line ------------------------------------------------

// Counts what goes out, for the access line and the metrics.
class CountingExchange : public ExchangeWrapper {
 public:
  using ExchangeWrapper::ExchangeWrapper;
  uint64_t bytes_in = 0, bytes_out = 0;
  int status = 0;
  bool client_gone = false;
  // When the response head went out, and the policy index it named (for the metrics).
  std::chrono::steady_clock::time_point head_sent;
  std::string response_policy;

  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    auto n = co_await ExchangeWrapper::read_body(buf);
    if (n.ok()) {
      bytes_in += *n;
    } else {
      client_gone = true;
    }
    co_return n;
  }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    Status s = co_await ExchangeWrapper::write_body(chunk);
    if (s.ok()) {
      bytes_out += chunk.size();
    } else {
      client_gone = true;
    }
    co_return s;
  }

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    status = response.status;
    head_sent = std::chrono::steady_clock::now();
    response_policy = response.headers.get_or("X-Backend-Storage-Policy-Index", "");
    size_t size = ExchangeWrapper::request().method == "HEAD" ? 0 : response.body.size();
    Status s = co_await ExchangeWrapper::do_respond(std::move(response));
    if (s.ok()) {
      bytes_out += size;
    } else {
      client_gone = true;
    }
    co_return s;
  }
  net::awaitable<Status> do_start_response(int st, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    status = st;
    head_sent = std::chrono::steady_clock::now();
    response_policy = headers.get_or("X-Backend-Storage-Policy-Index", "");
    return ExchangeWrapper::do_start_response(st, std::move(headers), length);
  }
};

// What proxy_logging reads from its section besides the metrics.
struct AccessLogOptions {
  AccessLogTemplate line;
  bool log_headers = false;               // access_log_headers
  std::vector<std::string> headers_only;  // access_log_headers_only, title-cased
  size_t reveal_sensitive_prefix = 16;
};

class ProxyLogging final : public Middleware {
 public:
  ProxyLogging(AccessLogOptions options, std::unique_ptr<common::StatsdClient> statsd,
               std::vector<std::string> methods, const common::StoragePolicies& policies)
      : options_(std::move(options)),
        statsd_(std::move(statsd)),
        valid_methods_(std::move(methods)),
        policies_(policies),
        pid_(::getpid()) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (env.log_info.count("proxy_logging.logged")) {  // the second instance in a pipeline
      co_await next(ex, env);
      co_return;
    }
    env.log_info["proxy_logging.logged"] = "1";
    double start = now_seconds();
    const auto started = std::chrono::steady_clock::now();
    CountingExchange out(ex);
    co_await next(out, env);
    double end = now_seconds();
    int status = out.client_gone && out.status == 0 ? 499 : out.status;
    if (statsd_) send_metrics(out, env, status, started);
    if (!common::log::enabled(common::log::Level::kInfo)) co_return;
    common::log::write(common::log::Level::kInfo,
                       options_.line.format(fields(out, env, status, start, end, started)));
  }

 private:
  static double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // Swift's replacements for the log template.
  AccessLogFields fields(const CountingExchange& out, const ProxyEnv& env, int status,
                         double start, double end,
                         std::chrono::steady_clock::time_point started) const {
    const Request& req = out.request();
    const size_t prefix = options_.reveal_sensitive_prefix;
    AccessLogFields f;
    f.start_time = start;
    f.end_time = end;
    f.client_ip = std::string(req.headers.get_or("X-Cluster-Client-Ip", ""));
    if (f.client_ip.empty()) {
      std::string_view fwd = req.headers.get_or("X-Forwarded-For", "");
      fwd = fwd.substr(0, fwd.find(','));
      while (!fwd.empty() && fwd.front() == ' ') fwd.remove_prefix(1);
      while (!fwd.empty() && fwd.back() == ' ') fwd.remove_suffix(1);
      f.client_ip = std::string(fwd);
    }
    if (f.client_ip.empty()) f.client_ip = req.remote_addr;
    f.remote_addr = req.remote_addr;
    std::string_view host = req.headers.get_or("Host", "");
    f.domain = std::string(host.substr(0, std::min(host.size(), host.rfind(':'))));
    f.method = req.method;
    f.path = common::http::percent_decode(obscure_target(req.target, prefix));
    f.protocol = req.version == 10 ? "HTTP/1.0" : "HTTP/1.1";
    f.status_int = status;
    f.wire_status_int = out.status;
    f.referer = std::string(req.headers.get_or("Referer", ""));
    f.user_agent = std::string(req.headers.get_or("User-Agent", ""));
    f.auth_token = obscure_sensitive(req.headers.get_or("X-Auth-Token", ""), prefix);
    f.bytes_recvd = out.bytes_in;
    f.bytes_sent = out.bytes_out;
    f.client_etag = std::string(req.headers.get_or("Etag", ""));
    f.transaction_id = env.trans_id;
    if (options_.log_headers) {
      f.headers = logged_headers(req.headers, options_.headers_only, prefix);
    }
    f.source = env.source;
    // swift.log_info: what middlewares noted of the request (container_sync's verdict...),
    // comma-joined (this instance's own marker is not one of them).
    for (const auto& [entry, value] : env.log_info) {
      if (entry == "proxy_logging.logged") continue;
      if (!f.log_info.empty()) f.log_info.push_back(',');
      f.log_info += value.empty() ? entry : entry + ":" + value;
    }
    f.policy_index = logged_policy(out, env);
    std::string_view swift_path = env.backend_path.empty() ? req.path() : env.backend_path;
    if (swift_path.starts_with("/v1/")) {
      std::string_view rest = swift_path.substr(4);
      std::string* parts[] = {&f.account, &f.container, &f.object};
      for (int i = 0; i < 3 && !rest.empty(); ++i) {
        const size_t slash = i < 2 ? rest.find('/') : std::string_view::npos;
        *parts[i] = common::http::percent_decode(rest.substr(0, slash));
        rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
      }
    }
    if (out.head_sent != std::chrono::steady_clock::time_point()) {
      f.ttfb = std::chrono::duration<double>(out.head_sent - started).count();
    }
    f.pid = pid_;
    return f;
  }

  // Swift's get_policy_index(): the response's X-Backend-Storage-Policy-Index, else the
  // request's (where Swift's proxy puts the policy an object request went to).
  static std::string logged_policy(const CountingExchange& out, const ProxyEnv& env) {
    if (!out.response_policy.empty()) return out.response_policy;
    if (!env.policy_index.empty()) return env.policy_index;
    return std::string(out.request().headers.get_or("X-Backend-Storage-Policy-Index", ""));
  }

  // Swift's proxy_logging metrics: "<type>.<method>.<status>" with .timing and .xfer (and,
  // for a GET, .first-byte.timing), the type from the path, or the Swift path behind an S3
  // request (/v1/a: account, /v1/a/c:
  // container, deeper: object; other paths: the subrequest's swift.source, else none), a method
  // outside access_log_statsd_valid_http_methods as BAD_METHOD; an object's also as
  // "object.policy.<index>.<method>.<status>" when the response (or request) names an existing
  // policy.
  void send_metrics(const CountingExchange& out, const ProxyEnv& env, int status,
                    std::chrono::steady_clock::time_point started) const {
    const Request& req = out.request();
    std::string_view path = env.backend_path.empty() ? req.path() : env.backend_path;
    std::string type;
    if (path.starts_with("/v1/")) {
      std::string_view trimmed = path;
      while (!trimmed.empty() && trimmed.front() == '/') trimmed.remove_prefix(1);
      while (!trimmed.empty() && trimmed.back() == '/') trimmed.remove_suffix(1);
      const auto slashes = std::count(trimmed.begin(), trimmed.end(), '/');
      type = slashes == 1 ? "account" : slashes == 2 ? "container" : slashes >= 3 ? "object" : "";
    } else {
      type = env.source;
    }
    if (type.empty()) return;
    const std::string method =
        std::find(valid_methods_.begin(), valid_methods_.end(), req.method) != valid_methods_.end()
            ? req.method
            : "BAD_METHOD";
    std::vector<std::string> names{type + "." + method + "." + std::to_string(status)};
    if (type == "object") {
      const std::string policy = logged_policy(out, env);
      if (!policy.empty() && policies_.by_index_string(policy)) {
        names.push_back("object.policy." + std::string(policy) + "." + method + "." +
                        std::to_string(status));
      }
    }
    auto ms = [&](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - started).count();
    };
    const double total = ms(std::chrono::steady_clock::now());
    for (const std::string& name : names) {
      if (req.method == "GET" && out.head_sent != std::chrono::steady_clock::time_point()) {
        statsd_->timing(name + ".first-byte.timing", ms(out.head_sent));
      }
      statsd_->timing(name + ".timing", total);
      statsd_->update_stats(name + ".xfer", static_cast<int64_t>(out.bytes_in + out.bytes_out));
    }
  }

  AccessLogOptions options_;
  std::unique_ptr<common::StatsdClient> statsd_;  // null: no metrics
  std::vector<std::string> valid_methods_;
  const common::StoragePolicies& policies_;
  int pid_;
};

// ---- cache -----------------------------------------------------------------------------------

// swift.cache for the middlewares after it: memcached when memcache_servers names servers
// (tempauth tokens shared by every proxy), else nothing (each proxy keeps its own).
class Cache final : public Middleware {
 public:
  Cache(std::vector<MemcacheServer> servers, MemcacheErrorLimit error_limit,
        double connect_timeout, double io_timeout) {
    if (!servers.empty()) {
      memcache_ = std::make_unique<Memcache>(std::move(servers), error_limit, connect_timeout,
                                             io_timeout);
    }
  }
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    env.memcache = memcache_.get();
    co_await next(ex, env);
  }

 private:
  std::unique_ptr<Memcache> memcache_;
};

// ---- crossdomain -----------------------------------------------------------------------------

class Crossdomain final : public Middleware {
 public:
  explicit Crossdomain(std::string policy) : policy_(std::move(policy)) {}
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    if (req.path() != "/crossdomain.xml" || (req.method != "GET" && req.method != "HEAD")) {
      co_await next(ex, env);
      co_return;
    }
    Response r;
    r.status = 200;
    r.headers.set("Content-Type", "application/xml; charset=utf-8");
    r.body =
        "<?xml version=\"1.0\"?>\n<!DOCTYPE cross-domain-policy SYSTEM "
        "\"http://www.adobe.com/xml/dtds/cross-domain-policy.dtd\" >\n<cross-domain-policy>\n" +
        policy_ + "\n</cross-domain-policy>";
    co_return co_await ex.reply(std::move(r));
  }
  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("crossdomain"), std::string("{}"));
  }

 private:
  std::string policy_;
};

// ---- listing_formats -------------------------------------------------------------------------

class ListingFormats final : public Middleware {
 public:
  explicit ListingFormats(const common::Constraints& constraints) : constraints_(constraints) {}
  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    std::string path = common::http::percent_decode(req.path());
    auto segs = common::http::split_path(path, 2, 4, true);
    bool listing = segs.ok() && (req.method == "GET" || req.method == "HEAD") &&
                   common::valid_api_version(constraints_, (*segs)[0].value_or("")) &&
                   !(*segs)[3].has_value() && (*segs)[1].has_value();
    if (!listing) {
      co_await next(ex, env);
      co_return;
    }
    bool account_listing = !(*segs)[2].has_value();
    std::string name = account_listing ? *(*segs)[1] : *(*segs)[2];
    auto format = common::http::query_param(req.query(), "format");
    if (format && !format->empty() && !common::check_utf8(*format, /*internal=*/true)) {
      co_return co_await ex.reply(
          common::http::text_response(400, "\"format\" parameter not valid UTF-8"));
    }
    auto negotiated = common::listing::negotiate(format, req.headers.get("Accept"));
    if (negotiated.status) {
      Response r = swob_response(negotiated.status);
      if (negotiated.status == 400) r.body = negotiated.error_body;
      co_return co_await ex.reply(std::move(r));
    }
    ResponseCapture held(ex, max_listing_body(constraints_));
    std::string target(req.path());
    target += "?" + common::http::with_query_param(req.query(), "format", "json");
    held.mutable_request().target = target;
    // As Swift's req.accept = ...: a format names the type the middlewares further on see.
    if (format && !format->empty()) {
      held.mutable_request().headers.set("Accept", negotiated.content_type);
    }
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(swob_response(500));
    Response r = std::move(held.held);
    if (r.status == 0) co_return;
    if (!env.format_listing || r.headers.erase(versioning::kFormattedListing) > 0) {
      // A middleware answered in its own format (?versions).
      if (req.method != "HEAD") r.headers.erase("Content-Length");
      co_return co_await ex.reply(std::move(r));
    }
    const std::string& type = negotiated.content_type;
    bool ok = r.status >= 200 && r.status < 300;
    std::string_view got_type = r.headers.get_or("Content-Type", "");
    if (ok && req.method == "HEAD") {
      r.headers.set("Content-Type", type + "; charset=utf-8");
      r.status = 204;
      if (!format) r.headers.set("Vary", "Accept");
    } else if (ok && got_type.starts_with("application/json")) {
      auto rendered = render(r.body, type, name, account_listing,
                             common::config_true_value(
                                 req.headers.get_or("X-Backend-Allow-Reserved-Names", "")));
      if (!rendered) {
        co_return co_await ex.reply(swob_response(500));
      }
      r.body = std::move(*rendered);
      r.headers.set("Content-Type", type + "; charset=utf-8");
      if (r.body.empty()) {
        r.status = 204;
      } else {
        r.status = 200;
      }
      if (!format) r.headers.set("Vary", "Accept");
    } else if (ok) {
      r.headers.set("Content-Type", type + "; charset=utf-8");
      if (!format) r.headers.set("Vary", "Accept");
    }
    co_return co_await ex.reply(std::move(r));
  }

 private:
  // The client's format from the backend's JSON; names with the reserved byte are dropped.
  static std::optional<std::string> render(const std::string& json, const std::string& type,
                                           const std::string& name, bool account,
                                           bool allow_reserved) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(json, ec);
    if (ec || !v.is_array()) return std::nullopt;
    // Swift writes back the JSON it read: the same bytes, with the keys other middlewares add
    // (symlink_path, slo_etag...). Only a listing with reserved names (\u0000) is re-rendered.
    if (type.ends_with("/json") &&
        (allow_reserved || json.find("\\u0000") == std::string::npos)) {
      return json;
    }
    auto str = [](const boost::json::object& o, const char* k) -> std::string {
      auto it = o.find(k);
      if (it == o.end()) return {};
      if (auto s = it->value().if_string()) return std::string(s->data(), s->size());
      return {};
    };
    auto num = [](const boost::json::object& o, const char* k) -> int64_t {
      auto it = o.find(k);
      if (it == o.end()) return 0;
      if (auto i = it->value().if_int64()) return *i;
      if (auto u = it->value().if_uint64()) return static_cast<int64_t>(*u);
      return 0;
    };
    if (account) {
      std::vector<common::listing::ContainerItem> items;
      for (const auto& e : v.as_array()) {
        const auto& o = e.as_object();
        common::listing::ContainerItem item;
        item.subdir = o.contains("subdir");
        item.name = item.subdir ? str(o, "subdir") : str(o, "name");
        if (!allow_reserved && item.name.find('\0') != std::string::npos) continue;
        item.count = num(o, "count");
        item.bytes = num(o, "bytes");
        item.last_modified = str(o, "last_modified");
        items.push_back(std::move(item));
      }
      if (type.ends_with("/json")) return common::listing::to_json(items);
      if (type.ends_with("/xml")) return common::listing::to_xml(items, name);
      return common::listing::to_plain(items);
    }
    std::vector<common::listing::ObjectItem> items;
    for (const auto& e : v.as_array()) {
      const auto& o = e.as_object();
      common::listing::ObjectItem item;
      item.subdir = o.contains("subdir");
      item.name = item.subdir ? str(o, "subdir") : str(o, "name");
      if (!allow_reserved && item.name.find('\0') != std::string::npos) continue;
      item.bytes = num(o, "bytes");
      item.hash = str(o, "hash");
      item.content_type = str(o, "content_type");
      item.last_modified = str(o, "last_modified");
      items.push_back(std::move(item));
    }
    if (type.ends_with("/json")) return common::listing::to_json(items);
    if (type.ends_with("/xml")) return common::listing::to_xml(items, name);
    return common::listing::to_plain(items);
  }

  const common::Constraints& constraints_;
};

// ---- ratelimit -------------------------------------------------------------------------------

// Swift's ratelimit: object writes (PUT, DELETE, POST, COPY) slowed to the rate
// container_ratelimit_<size> gives a container of that many objects (interpolated between the
// sizes given), container PUT/DELETE to account_ratelimit per account, listings to
// container_listing_ratelimit_<size>, and all writes of an account to its
// X-Account-Sysmeta-Global-Write-Ratelimit. Each limit is a counter in memcached, shared by
// every proxy: the time (in 1/clock_accuracy s) at which the next request may go. A request
// that would have to wait more than max_sleep_time_seconds gets 498; blacklisted accounts
// 497. Without memcached nothing is limited, as in Swift.
class RateLimit final : public Middleware {
 public:
  // (container size, requests per second), sorted by size.
  using Limits = std::vector<std::pair<int64_t, double>>;
  struct Options {
    double account_ratelimit = 0;
    double max_sleep_time_seconds = 60;
    double log_sleep_time_seconds = 0;
    int64_t clock_accuracy = 1000;
    int64_t rate_buffer_seconds = 5;
    std::vector<std::string> whitelist, blacklist;
    Limits container_limits, listing_limits;
  };

  RateLimit(Options o, const MiddlewareContext& context)
      : o_(std::move(o)), constraints_(context.swift.constraints), info_(context.info) {}

  static Result<Options> parse(const common::Section& s) {
    Options o;
    APUS_ASSIGN_OR_RETURN(o.account_ratelimit, s.get_double("account_ratelimit", 0));
    APUS_ASSIGN_OR_RETURN(o.max_sleep_time_seconds, s.get_double("max_sleep_time_seconds", 60));
    APUS_ASSIGN_OR_RETURN(o.log_sleep_time_seconds, s.get_double("log_sleep_time_seconds", 0));
    APUS_ASSIGN_OR_RETURN(o.clock_accuracy, s.get_int("clock_accuracy", 1000));
    APUS_ASSIGN_OR_RETURN(o.rate_buffer_seconds, s.get_int("rate_buffer_seconds", 5));
    if (o.clock_accuracy <= 0) return s.invalid("clock_accuracy", "must be positive");
    o.whitelist = common::list_from_csv(s.get_string("account_whitelist", ""));
    o.blacklist = common::list_from_csv(s.get_string("account_blacklist", ""));
    for (const auto& [key, value] : s.items()) {
      for (auto [prefix, limits] : {std::pair{"container_ratelimit_", &o.container_limits},
                                    std::pair{"container_listing_ratelimit_", &o.listing_limits}}) {
        std::string_view k(key);
        if (!k.starts_with(prefix)) continue;
        std::string size(k.substr(std::string_view(prefix).size()));
        auto rate = s.get_double(key, 0);
        if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos ||
            size.size() > 18 || !rate.ok()) {
          return s.invalid(key, "must be container_ratelimit_<size> = <requests per second>");
        }
        limits->emplace_back(std::stoll(size), *rate);
      }
    }
    std::sort(o.container_limits.begin(), o.container_limits.end());
    std::sort(o.listing_limits.begin(), o.listing_limits.end());
    return o;
  }

  // Swift's get_maxrate(): the rate for a container of `size` objects, on the line between
  // the configured sizes around it (the last rate beyond them); none below the first size or
  // for an empty container.
  static std::optional<double> max_rate(const Limits& limits, int64_t size) {
    if (size == 0) return std::nullopt;
    std::optional<double> rate;
    for (size_t i = 0; i < limits.size() && size >= limits[i].first; ++i) {
      if (i + 1 < limits.size()) {
        double slope = (limits[i + 1].second - limits[i].second) /
                       static_cast<double>(limits[i + 1].first - limits[i].first);
        rate = static_cast<double>(size - limits[i].first) * slope + limits[i].second;
      } else {
        rate = limits[i].second;
      }
    }
    return rate;
  }

  std::optional<std::pair<std::string, std::string>> info() const override {
    auto list = [](const Limits& limits) {
      std::string out = "[";
      for (size_t i = 0; i < limits.size(); ++i) {
        out += (i ? ", [" : "[") + std::to_string(limits[i].first) + ", " +
               common::pickle::python_float_repr(limits[i].second) + "]";
      }
      return out + "]";
    };
    return std::make_pair(
        std::string("ratelimit"),
        "{\"account_ratelimit\": " + common::pickle::python_float_repr(o_.account_ratelimit) +
            ", \"max_sleep_time_seconds\": " + common::pickle::python_float_repr(o_.max_sleep_time_seconds) +
            ", \"container_ratelimits\": " + list(o_.container_limits) +
            ", \"container_listing_ratelimits\": " + list(o_.listing_limits) + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (!env.memcache) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        APUS_LOG_WARNING("Warning: Cannot ratelimit without a memcached client");
      }
      co_await next(ex, env);
      co_return;
    }
    if (auto refused = co_await limit(ex.request(), env)) {
      co_return co_await ex.reply(std::move(*refused));
    }
    co_await next(ex, env);
  }

 private:
  static bool is_write(std::string_view method) {
    return method == "PUT" || method == "DELETE" || method == "POST" || method == "COPY";
  }

  // Waits as the limits say; a response when the request is refused instead.
  net::awaitable<std::optional<Response>> limit(const Request& req, ProxyEnv& env) {
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 1, 4, true);
    if (!segs.ok() || !common::valid_api_version(constraints_,
                                                 (*segs)[0].value_or(""))) {
      co_return std::nullopt;
    }
    const std::string account = (*segs)[1].value_or("");
    const std::string container = (*segs)[2].value_or("");
    const std::string object = (*segs)[3].value_or("");
    if (account.empty()) co_return std::nullopt;
    CachedInfo account_info = co_await info_.account_info(account, req, env);
    std::string global(account_info.headers.get_or("X-Account-Sysmeta-Global-Write-Ratelimit", ""));
    if (global == "WHITELIST" ||
        std::find(o_.whitelist.begin(), o_.whitelist.end(), account) != o_.whitelist.end()) {
      co_return std::nullopt;
    }
    if (global == "BLACKLIST" ||
        std::find(o_.blacklist.begin(), o_.blacklist.end(), account) != o_.blacklist.end()) {
      APUS_LOG_ERROR("Returning 497 because of blacklisting: " + account);
      co_await sleep(1);  // as Swift does, so a blacklisted client cannot spin
      Response r = common::http::swob_response_with_body(497, "Your account has been blacklisted");
      r.reason = "Blacklisted";
      co_return r;
    }
    std::vector<std::pair<std::string, double>> keys;  // memcached key, requests per second
    if (o_.account_ratelimit > 0 && !container.empty() && object.empty() &&
        (req.method == "PUT" || req.method == "DELETE")) {
      keys.emplace_back("ratelimit/" + account, o_.account_ratelimit);
    }
    const bool object_write = !object.empty() && is_write(req.method);
    const bool listing = !container.empty() && object.empty() && req.method == "GET";
    if (object_write || listing) {
      CachedInfo info = co_await info_.container_info(account, container, req, env);
      int64_t size = std::atoll(std::string(info.headers.get_or("X-Container-Object-Count", "0")).c_str());
      auto rate = max_rate(object_write ? o_.container_limits : o_.listing_limits, size);
      if (rate && *rate > 0) {
        keys.emplace_back((object_write ? "ratelimit/" : "ratelimit_listing/") + account + "/" +
                              container,
                          *rate);
      }
    }
    if (is_write(req.method) && !global.empty()) {
      char* end = nullptr;
      double rate = std::strtod(global.c_str(), &end);
      if (end && *end == '\0' && rate > 0) keys.emplace_back("ratelimit/global-write/" + account, rate);
    }
    for (const auto& [key, rate] : keys) {
      auto wait = co_await sleep_time(*env.memcache, key, rate);
      if (!wait) {
        std::string path = account + "/" + container + (object.empty() ? "" : "/" + object);
        APUS_LOG_ERROR("Returning 498 for " + req.method + " to " + path +
                       ". Ratelimit (Max Sleep) exceeded");
        Response r = common::http::swob_response_with_body(498, "Slow down");
        r.reason = "Rate Limited";
        co_return r;
      }
      if (o_.log_sleep_time_seconds > 0 && *wait > o_.log_sleep_time_seconds) {
        APUS_LOG_WARNING("Ratelimit sleep log: " + std::to_string(*wait) + " for " + account +
                         "/" + container + "/" + object);
      }
      if (*wait > 0) co_await sleep(*wait);
    }
    co_return std::nullopt;
  }

  // Swift's _get_sleep_time(): takes this request's slot on the counter; the seconds to wait
  // for it, 0 without memcached, nullopt (slot given back) past max_sleep_time_seconds.
  net::awaitable<std::optional<double>> sleep_time(Memcache& mc, const std::string& key,
                                                   double rate) {
    const auto acc = static_cast<double>(o_.clock_accuracy);
    const double now_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto now = static_cast<int64_t>(std::llround(now_s * acc));
    const auto per_request = static_cast<int64_t>(std::llround(acc / rate));
    auto running = co_await mc.incr(key, per_request);
    if (!running) co_return 0.0;
    int64_t need = 0;
    if (now - *running > o_.rate_buffer_seconds * o_.clock_accuracy) {
      // Idle for a while: start over from now rather than let a burst through.
      co_await mc.set_raw(key, std::to_string(now + per_request), 0);
    } else {
      need = std::max<int64_t>(*running - now - per_request, 0);
    }
    if (o_.max_sleep_time_seconds * acc - static_cast<double>(need) <= acc * 0.01) {
      (void)co_await mc.incr(key, -per_request);
      co_return std::nullopt;
    }
    co_return static_cast<double>(need) / acc;
  }

  static net::awaitable<void> sleep(double seconds) {
    net::steady_timer t(co_await net::this_coro::executor,
                        std::chrono::duration_cast<net::steady_timer::duration>(
                            std::chrono::duration<double>(seconds)));
    co_await t.async_wait(net::use_awaitable);
  }

  Options o_;
  const common::Constraints& constraints_;
  InfoLookup& info_;
};

// The factories of the middlewares built in this file, by entry point.
Result<std::unique_ptr<Middleware>> make_catch_errors(const common::Section& section,
                                                      const MiddlewareContext&) {
  return std::unique_ptr<Middleware>(
      std::make_unique<CatchErrors>(section.get_string("trans_id_suffix", "")));
}

Result<std::unique_ptr<Middleware>> make_gatekeeper(const common::Section& section,
                                                    const MiddlewareContext&) {
  bool allow_reserved = false;
  APUS_ASSIGN_OR_RETURN(allow_reserved, section.get_bool("allow_reserved_names_header", false));
  return std::unique_ptr<Middleware>(std::make_unique<Gatekeeper>(allow_reserved));
}

Result<std::unique_ptr<Middleware>> make_healthcheck(const common::Section& section,
                                                     const MiddlewareContext&) {
  return std::unique_ptr<Middleware>(
      std::make_unique<Healthcheck>(section.get_string("disable_path", "")));
}

Result<std::unique_ptr<Middleware>> make_proxy_logging(const common::Section& section,
                                                       const MiddlewareContext& context) {
  auto statsd = common::StatsdClient::from_section(section, "proxy-server", "access_");
  if (!statsd.ok()) return statsd.status();
  auto line = AccessLogTemplate::parse(
      section.get_string("log_msg_template", std::string(kDefaultLogTemplate)),
      section.get_string("log_anonymization_method", "md5"),
      section.get_string("log_anonymization_salt", ""));
  if (!line.ok()) return section.invalid("log_msg_template", line.status().message());
  AccessLogOptions options{.line = std::move(*line)};
  bool log_headers = false;
  APUS_ASSIGN_OR_RETURN(log_headers, section.get_bool("log_headers", false));
  APUS_ASSIGN_OR_RETURN(options.log_headers, section.get_bool("access_log_headers", log_headers));
  for (const std::string& name :
       common::list_from_csv(section.get_string("access_log_headers_only", ""))) {
    options.headers_only.push_back(common::http::title_case(name));
  }
  int64_t reveal = 16;
  APUS_ASSIGN_OR_RETURN(reveal, section.get_int("reveal_sensitive_prefix", 16));
  if (reveal < 0) return section.invalid("reveal_sensitive_prefix", "must not be negative");
  options.reveal_sensitive_prefix = static_cast<size_t>(reveal);
  // access_log_statsd_valid_http_methods, else log_statsd_valid_http_methods, as Swift reads it.
  std::string methods = section.get_string("access_log_statsd_valid_http_methods", "");
  if (methods.empty()) {
    methods = section.get_string("log_statsd_valid_http_methods",
                                 "GET,HEAD,POST,PUT,DELETE,COPY,OPTIONS");
  }
  std::vector<std::string> valid = common::list_from_csv(methods);
  for (std::string& m : valid) {
    for (char& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return std::unique_ptr<Middleware>(std::make_unique<ProxyLogging>(
      std::move(options), std::move(*statsd), std::move(valid), context.swift.policies));
}

Result<std::unique_ptr<Middleware>> make_memcache(const common::Section& section,
                                                  const MiddlewareContext& context) {
  // memcache_servers from the filter, else from memcache.conf in swift_dir, as Swift reads it.
  // So are the error limits and the timeouts: the filter's own, else memcache.conf's, else
  // Swift's defaults. (Swift's pool_timeout, tries and memcache_max_connections size its
  // per-worker connection pool; Apus keeps one connection per server per worker thread.)
  std::string servers = section.get_string("memcache_servers", "");
  auto mc_conf = common::Config::load(context.swift_dir + "/memcache.conf");
  common::Section from_file = mc_conf.ok() ? mc_conf->section("memcache") : common::Section();
  if (servers.empty()) servers = from_file.get_string("memcache_servers", "");
  auto parsed = Memcache::parse_servers(common::list_from_csv(servers));
  if (!parsed.ok()) return section.invalid("memcache_servers", parsed.status().message());
  // An option from the filter, else from memcache.conf, else `def`; refused outside [lo, hi].
  auto option = [&](const char* key, double def, double lo, double hi,
                    const char* range) -> Result<double> {
    auto v = (section.has(key) ? section : from_file).get_double(key, def);
    if (v.ok() && !(*v >= lo && *v <= hi)) return section.invalid(key, range);
    return v;
  };
  auto limit_option = [&](const char* key, double def) {
    return option(key, def, 0, std::numeric_limits<double>::max(), "must not be negative");
  };
  MemcacheErrorLimit limit;
  auto count = limit_option("error_suppression_limit", static_cast<double>(limit.count));
  if (!count.ok()) return count.status();
  auto interval = limit_option("error_suppression_interval", limit.interval);
  if (!interval.ok()) return interval.status();
  limit.count = static_cast<size_t>(std::min(*count, 1e6));  // a double past size_t is UB
  limit.interval = *interval;
  auto timeout_option = [&](const char* key, double def) {
    return option(key, def, std::numeric_limits<double>::min(), 3600, "must be in (0, 3600]");
  };
  auto connect_timeout = timeout_option("connect_timeout", 0.3);  // Swift's CONN_TIMEOUT
  if (!connect_timeout.ok()) return connect_timeout.status();
  auto io_timeout = timeout_option("io_timeout", 2.0);  // Swift's IO_TIMEOUT
  if (!io_timeout.ok()) return io_timeout.status();
  return std::unique_ptr<Middleware>(
      std::make_unique<Cache>(std::move(*parsed), limit, *connect_timeout, *io_timeout));
}

Result<std::unique_ptr<Middleware>> make_listing_formats(const common::Section&,
                                                         const MiddlewareContext& context) {
  return std::unique_ptr<Middleware>(std::make_unique<ListingFormats>(context.swift.constraints));
}

Result<std::unique_ptr<Middleware>> make_crossdomain(const common::Section& section,
                                                     const MiddlewareContext&) {
  return std::unique_ptr<Middleware>(std::make_unique<Crossdomain>(section.get_string(
      "cross_domain_policy", "<allow-access-from domain=\"*\" secure=\"false\" />")));
}

Result<std::unique_ptr<Middleware>> make_ratelimit(const common::Section& section,
                                                   const MiddlewareContext& context) {
  auto options = RateLimit::parse(section);
  if (!options.ok()) return options.status();
  return std::unique_ptr<Middleware>(std::make_unique<RateLimit>(std::move(*options), context));
}

Result<std::unique_ptr<Middleware>> make_copy_filter(const common::Section&,
                                                     const MiddlewareContext& context) {
  return make_copy(context);
}

using MiddlewareFactory = Result<std::unique_ptr<Middleware>> (*)(const common::Section&,
                                                                  const MiddlewareContext&);

// The middlewares Apus implements: one row each, entry point -> factory. Register a new
// middleware by adding its row here.
constexpr std::pair<std::string_view, MiddlewareFactory> kMiddlewares[] = {
    {"catch_errors", make_catch_errors},
    {"gatekeeper", make_gatekeeper},
    {"healthcheck", make_healthcheck},
    {"proxy_logging", make_proxy_logging},
    {"memcache", make_memcache},
    {"listing_formats", make_listing_formats},
    {"crossdomain", make_crossdomain},
    {"tempauth", make_tempauth},
    {"ratelimit", make_ratelimit},
    {"copy", make_copy_filter},
    {"slo", make_slo},
    {"dlo", make_dlo},
    {"symlink", make_symlink},
    {"bulk", make_bulk},
    {"tempurl", make_tempurl},
    {"formpost", make_formpost},
    {"staticweb", make_staticweb},
    {"container_quotas", make_container_quotas},
    {"account_quotas", make_account_quotas},
    {"name_check", make_name_check},
    {"read_only", make_read_only},
    {"etag_quoter", make_etag_quoter},
    {"domain_remap", make_domain_remap},
    {"list_endpoints", make_list_endpoints},
    {"cname_lookup", make_cname_lookup},
    {"versioned_writes", make_versioned_writes},
    {"s3api", make_s3api},
    {"container_sync", make_container_sync},
    {"keymaster", make_keymaster},
    {"encryption", make_encryption},
};

// Every paste.filter_factory entry point of Swift 2.35's setup.cfg (2.30.1's, plus
// backend_ratelimit), implemented by Apus or not.
constexpr std::string_view kSwiftMiddlewares[] = {
    "healthcheck",     "crossdomain",     "memcache",       "read_only",
    "ratelimit",       "backend_ratelimit", "cname_lookup", "catch_errors",
    "domain_remap",    "staticweb",       "tempauth",       "keystoneauth",
    "recon",           "tempurl",         "formpost",       "name_check",
    "bulk",            "container_quotas", "account_quotas", "proxy_logging",
    "dlo",             "slo",             "list_endpoints", "gatekeeper",
    "container_sync",  "xprofile",        "versioned_writes", "copy",
    "keymaster",       "encryption",      "kms_keymaster",  "kmip_keymaster",
    "listing_formats", "symlink",         "s3api",          "s3token",
    "etag_quoter",
};

MiddlewareFactory factory_of(std::string_view name) {
  for (const auto& [entry, make] : kMiddlewares) {
    if (entry == name) return make;
  }
  return nullptr;
}

}  // namespace

bool has_middleware(std::string_view name) { return factory_of(name) != nullptr; }

std::span<const std::string_view> swift_middleware_names() { return kSwiftMiddlewares; }

bool is_swift_middleware(std::string_view name) {
  return std::find(std::begin(kSwiftMiddlewares), std::end(kSwiftMiddlewares), name) !=
         std::end(kSwiftMiddlewares);
}

Result<std::unique_ptr<Middleware>> make_middleware(std::string_view name,
                                                    const common::Section& section,
                                                    const MiddlewareContext& context) {
  if (MiddlewareFactory make = factory_of(name)) return make(section, context);
  if (is_swift_middleware(name)) {
    return Status::invalid_argument("middleware egg:swift#" + std::string(name) + " in [" +
                                    section.name() + "] is not implemented by Apus");
  }
  return Status::invalid_argument("unknown middleware egg:swift#" + std::string(name) +
                                  " in [" + section.name() + "]");
}

}  // namespace apus::proxy
