// ProxyApp: the proxy-server app at the end of the pipeline, and the controllers it routes to
// (account, container, object, /info). Private to proxy/.
//
// Thread-safe: the rings, the node health and the info cache are.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/timestamp.h"
#include "proxy/backend.h"
#include "proxy/info_cache.h"
#include "proxy/pipeline.h"
#include "proxy/proxy_server.h"
#include "ring/ring.h"

namespace apus::proxy {

// The parts of a /v1/<account>[/<container>[/<object>]] path, decoded.
struct ApiPath {
  std::string version, account, container, object;
};

// Where an object write goes: its policy's ring and partition, and the container replicas its
// object servers tell.
struct ObjectPlacement {
  int policy = 0;
  ring::Ring* ring = nullptr;
  uint32_t partition = 0;
  ring::NodeList container_nodes;
};

// A good answer to an object GET or HEAD, its body still to be read.
struct ObjectSource {
  std::unique_ptr<common::http::ClientConnection> conn;
  common::http::ClientResponse head;
  common::Timestamp timestamp;  // Swift's source_key()
};

// Bytes first..last (inclusive) of an object.
struct ByteSpan {
  uint64_t first = 0;
  uint64_t last = 0;
};

class ProxyApp final : public InfoLookup {
 public:
  ProxyApp(ProxyConfig config, std::unique_ptr<ring::Ring> account_ring,
           std::unique_ptr<ring::Ring> container_ring,
           std::map<int, std::unique_ptr<ring::Ring>> object_rings);

  // The app: routes the request to a controller.
  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env);

  const ProxyConfig& config() const { return config_; }
  // The sections /info shows for the app itself ("swift").
  std::string swift_info_json() const;
  void set_middleware_info(std::vector<std::pair<std::string, std::string>> sections) {
    middleware_info_ = std::move(sections);
  }

  // The app's settings as middlewares are built with them.
  MiddlewareContext middleware_context() {
    return MiddlewareContext{config_.swift, config_.swift_dir, *this};
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
  boost::asio::awaitable<void> account_request(common::http::Exchange& ex, ProxyEnv& env,
                                               const ApiPath& p);
  boost::asio::awaitable<void> container_request(common::http::Exchange& ex, ProxyEnv& env,
                                                 const ApiPath& p);
  // The container request once OPTIONS and CORS are dealt with.
  boost::asio::awaitable<void> container_request_inner(common::http::Exchange& ex,
                                                       ProxyEnv& env, const ApiPath& p);
  boost::asio::awaitable<void> object_request(common::http::Exchange& ex, ProxyEnv& env,
                                              const ApiPath& p);
  boost::asio::awaitable<void> object_request_inner(common::http::Exchange& ex, ProxyEnv& env,
                                                    const ApiPath& p,
                                                    const CachedInfo& container);
  boost::asio::awaitable<void> info_request(common::http::Exchange& ex);

  // Object methods (object_controller.cpp).
  boost::asio::awaitable<void> object_put(common::http::Exchange& ex, ProxyEnv& env,
                                          const ApiPath& p, const CachedInfo& container);
  boost::asio::awaitable<void> object_get_head(common::http::Exchange& ex, ProxyEnv& env,
                                               const ApiPath& p, const CachedInfo& container);
  boost::asio::awaitable<void> object_post_delete(common::http::Exchange& ex, ProxyEnv& env,
                                                  const ApiPath& p, const CachedInfo& container);

  // Streams the body of an object GET answer that has no Content-Length to the client, chunked.
  boost::asio::awaitable<void> stream_unsized_body(common::http::Exchange& ex,
                                                   ObjectSource& source, int status,
                                                   common::http::HeaderMap headers,
                                                   const std::string& path);
  // Swift's _get_source_and_node() for objects: asks the nodes of `it` one at a time until one gives
  // a good answer (2xx, 3xx, 416), or with `newest` asks them all and keeps the newest. A good
  // answer older than a tombstone another node reported (404 with X-Backend-Timestamp) does
  // not count, nor, with `etag` (a resume), one of another ETag. `request.target` is the path
  // after the device. The other answers are added to `answers`.
  boost::asio::awaitable<std::optional<ObjectSource>> find_object_source(
      NodeIter& it, const common::http::ClientRequest& request, bool newest,
      std::string_view etag, std::vector<BackendResponse>& answers);
  // GET or HEAD from one node at a time until a good answer (2xx, 3xx; 416 for objects).
  // Returns the good answer, or Swift's best response over all the answers.
  boost::asio::awaitable<common::http::Response> get_or_head(ring::Ring& ring, uint32_t part,
                                                             const std::string& method,
                                                             const std::string& path_after_part,
                                                             const common::http::HeaderMap& h);
  // CORS (Swift's cors_validation and OPTIONS): `container` is the container's info.
  bool origin_allowed(const CachedInfo& container, std::string_view origin) const;
  void add_cors_headers(const CachedInfo& container, std::string_view origin,
                        common::http::HeaderMap& response) const;
  common::http::Response options_response(const common::http::Request& req,
                                          std::string_view allowed,
                                          const CachedInfo* container) const;
  ring::Ring* object_ring(int policy);
  // The placement of an object in `container` (its policy), or nullopt without a ring for it.
  std::optional<ObjectPlacement> place_object(const ApiPath& p, const CachedInfo& container);
  // The nodes to try for `part`, in the order of the policy's (or, for accounts and
  // containers, the app's) NodeOrder.
  NodeIter nodes(ring::Ring& ring, uint32_t part,
                 NodeIter::Purpose purpose = NodeIter::Purpose::kRead,
                 std::optional<int> policy = std::nullopt);
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

// Authorization as the controllers ask for it: runs env.authorize (if any) with env.acl set
// to `acl`; a response when denied.
boost::asio::awaitable<std::optional<common::http::Response>> authorize(
    const common::http::Request& req, ProxyEnv& env, const std::optional<std::string>& acl);

}  // namespace apus::proxy
