// ProxyApp: the proxy-server app at the end of the pipeline (Swift's proxy/server.py
// Application). It owns the rings, the node health shared by every request, the account and
// container info cache and the config; it routes each request to a controller
// (proxy/controllers/), which does the work; and it answers middlewares' info lookups.
// Private to proxy/.
//
// Thread-safe: the rings, the node health and the info cache are; the config and the /info
// sections are set before the first request and only read after.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/statsd.h"
#include "proxy/backend.h"
#include "proxy/info_cache.h"
#include "proxy/pipeline.h"
#include "proxy/proxy_server.h"
#include "ring/ring.h"

namespace apus::proxy {

class ProxyApp final : public InfoLookup, public HandoffLog {
 public:
  ProxyApp(ProxyConfig config, std::unique_ptr<ring::Ring> account_ring,
           std::unique_ptr<ring::Ring> container_ring,
           std::map<int, std::unique_ptr<ring::Ring>> object_rings);

  // The app: routes the request to a controller (Swift's get_controller).
  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env);

  const ProxyConfig& config() const { return config_; }
  NodeHealth& health() { return health_; }
  // Swift's proxy app counters in StatsD ("errors", "object.client_timeouts", ...), under
  // proxy-server.; nothing without log_statsd_host. Set before the first request.
  void set_statsd(std::unique_ptr<common::StatsdClient> statsd) { statsd_ = std::move(statsd); }
  void count(std::string_view name) const {
    if (statsd_) statsd_->increment(name);
  }
  // HandoffLog: Swift's warning and its proxy-server.handoff_count / .handoff_all_count.
  void extra_handoff(size_t handoffs, bool all_primaries) override;
  ring::Ring& account_ring() { return *account_ring_; }
  ring::Ring& container_ring() { return *container_ring_; }
  // The object ring of `policy`, or null when there is none.
  ring::Ring* object_ring(int policy);

  // The middlewares whose sections /info shows besides "swift". Set before the first request;
  // `filters` must outlive every request.
  void set_info_sources(const std::vector<std::unique_ptr<Middleware>>* filters) {
    info_sources_ = filters;
  }
  // Those sections, asked of each middleware on every call (container_sync's realms change
  // while the proxy runs, as Swift registers them again on each /info).
  std::vector<std::pair<std::string, std::string>> middleware_info() const {
    std::vector<std::pair<std::string, std::string>> out;
    if (info_sources_ == nullptr) return out;
    for (const auto& mw : *info_sources_) {
      for (auto& section : mw->info_sections()) out.push_back(std::move(section));
    }
    return out;
  }

  // The app's settings as middlewares are built with them.
  MiddlewareContext middleware_context() {
    return MiddlewareContext{config_.swift, config_.swift_dir, *this, &config_.app_section};
  }

  // InfoLookup.
  boost::asio::awaitable<CachedInfo> account_info(const std::string& account,
                                                  const common::http::Request& req,
                                                  const ProxyEnv& env) override;
  boost::asio::awaitable<CachedInfo> container_info(const std::string& account,
                                                    const std::string& container,
                                                    const common::http::Request& req,
                                                    const ProxyEnv& env) override;
  boost::asio::awaitable<void> forget_info(std::string account, std::string container,
                                           const ProxyEnv& env) override;

 private:
  std::unique_ptr<common::StatsdClient> statsd_;
  // The info of an account (`container` empty) or container: from the cache, else a HEAD to
  // its nodes, then cached.
  boost::asio::awaitable<CachedInfo> cached_head(const std::string& account,
                                                 const std::string& container,
                                                 const common::http::Request& req,
                                                 const ProxyEnv& env);

  ProxyConfig config_;
  std::unique_ptr<ring::Ring> account_ring_;
  std::unique_ptr<ring::Ring> container_ring_;
  std::map<int, std::unique_ptr<ring::Ring>> object_rings_;
  NodeHealth health_;
  const std::vector<std::unique_ptr<Middleware>>* info_sources_ = nullptr;
  InfoCache info_cache_;
};

}  // namespace apus::proxy
