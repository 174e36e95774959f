// Controller: what the account, container and object controllers share, as Swift's
// proxy/controllers/base.py has it: reading from the nodes of a partition one at a time
// (get_or_head), the node iterator of a ring in the app's NodeOrder, account and container
// info through the app's cache, the authorize() step, and CORS (responses to OPTIONS, headers
// added to the others). Private to proxy/.
//
// The app makes one controller per request (Swift's get_controller), on that request's
// coroutine frame; it keeps a reference to the app, which outlives every request.
// Thread-compatible: a controller belongs to its request's worker thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "common/constraints.h"
#include "common/http/server.h"
#include "proxy/backend.h"
#include "proxy/pipeline.h"
#include "ring/ring.h"

namespace apus::proxy {

class ProxyApp;
struct ProxyConfig;

// The parts of a /v1/<account>[/<container>[/<object>]] path, decoded.
struct ApiPath {
  std::string version, account, container, object;
};

// Authorization as the controllers ask for it: runs env.authorize (if any) with env.acl set
// to `acl`; a response when denied.
boost::asio::awaitable<std::optional<common::http::Response>> authorize(
    const common::http::Request& req, ProxyEnv& env, const std::optional<std::string>& acl);

// GET or HEAD from one node of `part` at a time until a good answer (2xx, 3xx), every node
// with X-Newest. Returns the good answer (the newest), or Swift's best response over all the
// answers. `path_after_part` is the quoted path (and query) after the partition. Swift's
// GETorHEAD_base for accounts and containers; the app's info lookups use it too.
boost::asio::awaitable<common::http::Response> get_or_head(ProxyApp& app, ring::Ring& ring,
                                                           uint32_t part,
                                                           const std::string& method,
                                                           const std::string& path_after_part,
                                                           const common::http::HeaderMap& h);

// The nodes to try for `part`, in the order of the policy's (or, for accounts and containers,
// the app's) NodeOrder.
NodeIter iter_nodes(ProxyApp& app, ring::Ring& ring, uint32_t part,
                    NodeIter::Purpose purpose = NodeIter::Purpose::kRead,
                    std::optional<int> policy = std::nullopt);

// A failed check_*() of common/constraints.h as the text/plain refusal Swift answers with;
// nullopt when it passed.
std::optional<common::http::Response> refusal(const common::CheckResult& check);

class Controller {
 public:
  // `app` must outlive the controller.
  Controller(ProxyApp& app, ApiPath path) : app_(app), path_(std::move(path)) {}
  virtual ~Controller() = default;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Answers the request (every path through it responds).
  virtual boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) = 0;

 protected:
  ProxyApp& app() { return app_; }
  const ProxyConfig& config() const;
  NodeHealth& health();
  const ApiPath& path() const { return path_; }

  // The app's cached account and container info (InfoLookup).
  boost::asio::awaitable<CachedInfo> account_info(const common::http::Request& req,
                                                  const ProxyEnv& env);
  boost::asio::awaitable<CachedInfo> container_info(const common::http::Request& req,
                                                    const ProxyEnv& env);
  // Drops the cached info of this path's account, or of its container.
  boost::asio::awaitable<void> forget_account_info(const ProxyEnv& env);
  boost::asio::awaitable<void> forget_container_info(const ProxyEnv& env);

  // Whether `method` is one of `allowed` ("DELETE, GET, ..."), and the 405 naming them when
  // it is not.
  static bool allows(std::string_view allowed, std::string_view method);
  static common::http::Response method_not_allowed(std::string_view allowed);

  // CORS (Swift's cors_validation and OPTIONS): `container` is the container's info.
  bool origin_allowed(const CachedInfo& container, std::string_view origin) const;
  // The edit that adds the CORS headers for `origin` to a response.
  HeaderEditor::Edit cors_edit(CachedInfo container, std::string origin) const;
  // The answer to OPTIONS: 200 with Allow, and for a preflight (Origin) against `container`
  // the Access-Control-Allow-* headers, or 401 when the origin or method is not allowed.
  common::http::Response options_response(const common::http::Request& req,
                                          std::string_view allowed,
                                          const CachedInfo* container) const;

 private:
  void add_cors_headers(const CachedInfo& container, std::string_view origin,
                        common::http::HeaderMap& response) const;

  ProxyApp& app_;
  ApiPath path_;
};

// Headers only an owner of the account may see or set (Swift's swift_owner_headers), removed.
void remove_owner_headers(common::http::HeaderMap& h);

// Swift's transfer_headers(): X-Remove-<Type>-Meta-<k>, and for containers the few fixed
// removals Swift lists, become the plain header with an empty value. `type` is "account" or
// "container".
void apply_removes(common::http::HeaderMap& h, std::string_view type);

}  // namespace apus::proxy
