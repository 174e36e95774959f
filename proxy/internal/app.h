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
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "proxy/backend.h"
#include "proxy/info_cache.h"
#include "proxy/pipeline.h"
#include "proxy/proxy_server.h"
#include "ring/ring.h"

namespace apus::proxy {

class ProxyApp final : public InfoLookup {
 public:
  ProxyApp(ProxyConfig config, std::unique_ptr<ring::Ring> account_ring,
           std::unique_ptr<ring::Ring> container_ring,
           std::map<int, std::unique_ptr<ring::Ring>> object_rings);

  // The app: routes the request to a controller (Swift's get_controller).
  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env);

  const ProxyConfig& config() const { return config_; }
  NodeHealth& health() { return health_; }
  ring::Ring& account_ring() { return *account_ring_; }
  ring::Ring& container_ring() { return *container_ring_; }
  // The object ring of `policy`, or null when there is none.
  ring::Ring* object_ring(int policy);

  // The sections /info shows besides "swift": one per middleware that has any. Set before the
  // first request.
  void set_middleware_info(std::vector<std::pair<std::string, std::string>> sections) {
    middleware_info_ = std::move(sections);
  }
  const std::vector<std::pair<std::string, std::string>>& middleware_info() const {
    return middleware_info_;
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
  std::vector<std::pair<std::string, std::string>> middleware_info_;
  InfoCache info_cache_;
};

}  // namespace apus::proxy
