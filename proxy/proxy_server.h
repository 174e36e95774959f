// ProxyServer: Swift's proxy (swift-protocol.md §12-15): the middleware pipeline of a stock
// proxy-server.conf in front of the account, container and object controllers, which reach
// the storage servers through the rings with Swift's quorum, handoff and error-limiting rules.
//
// Thread-safe: handle() runs on any worker. Shared state (error limits, the info cache) is
// guarded inside its owner.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/http/server.h"
#include "proxy/backend.h"
#include "proxy/pipeline.h"
#include "ring/ring.h"

namespace apus::proxy {

struct ProxyConfig {
  common::http::ServerOptions server;
  std::string swift_dir = "/etc/swift";
  common::SwiftConf swift;
  BackendOptions backend;  // conn_timeout, node_timeout, post_quorum_timeout
  double recoverable_node_timeout = 10;
  // 404s without a tombstone an object GET does not count (Swift's default 1; at most the
  // primaries but one). Swift also reads it per policy; Apus reads [app:proxy-server]'s only.
  int64_t rebalance_missing_suppression_count = 1;
  bool allow_account_management = false;
  bool account_autocreate = false;
  int64_t max_containers_per_account = 0;
  std::vector<std::string> max_containers_whitelist;
  size_t client_chunk_size = 65536;
  size_t object_chunk_size = 65536;
  size_t put_queue_depth = 10;  // chunks a replica's connection may lag behind the others
  int error_suppression_limit = 10;
  double error_suppression_interval = 60;
  NodeOrder node_order;                         // sorting_method, read/write affinity
  std::map<int, NodeOrder> policy_node_order;  // [<app>:policy:N] overrides, by policy index
  double timing_expiry = 300;
  double recheck_account_existence = 60;
  double recheck_container_existence = 60;
  // Apus's own: how long this process keeps an info it read from memcached (InfoCache).
  double local_info_cache_ttl = 1.0;
  // How long the shard ranges of a sharded container that take object updates stay cached
  // (Swift's option and default); 0 asks the container for the one range at every write.
  double recheck_updating_shard_ranges = 3600;
  std::string log_name = "proxy-server";
  bool expose_info = true;
  std::string request_node_count = "2 * replicas";
  bool log_handoffs = true;  // a warning and handoff_count when a primary was skipped
  bool strict_cors_mode = true;
  std::vector<std::string> cors_allow_origin;    // origins allowed for every container
  std::vector<std::string> cors_expose_headers;  // added to Access-Control-Expose-Headers
  // Where objects with X-Delete-At are queued for the expirer (the account, with its
  // auto-create prefix) and how many seconds of delete-at share a queue container.
  std::string expiring_objects_account = ".expiring_objects";
  int64_t expiring_objects_container_divisor = 86400;
  common::Section app_section;  // the section all of the above came from, as read

  // Reads [app:proxy-server] (the last element of [pipeline:main]) and swift.conf. Errors name
  // the file, section and key.
  static common::Result<ProxyConfig> from_config(const common::Config& conf);
  // How many nodes a request may try in all, for a ring of `replicas` replicas.
  size_t node_count(double replicas) const;
  // The node order for object requests of `policy`, or for account and container requests.
  const NodeOrder& order_for(std::optional<int> policy) const;
};

class ProxyApp;

class ProxyServer {
 public:
  struct Options {
    // Whether the filters Swift requires (catch_errors, gatekeeper, listing_formats, copy,
    // dlo, versioned_writes) are added where the pipeline lacks them: Swift's
    // allow_modify_pipeline, on for a proxy server, off for an internal client.
    bool modify_pipeline = true;
  };

  // Builds the pipeline of `conf`. InvalidArgument naming an unknown middleware or a bad
  // option; NotFound when a ring is missing.
  static common::Result<std::unique_ptr<ProxyServer>> create(const common::Config& conf,
                                                             Options options);
  static common::Result<std::unique_ptr<ProxyServer>> create(const common::Config& conf) {
    return create(conf, Options{});
  }
  ~ProxyServer();

  // The request handler for common::http::Server.
  boost::asio::awaitable<void> handle(common::http::Exchange& ex);
  // A request made in this process (proxy/internal_client.h) through the pipeline: as
  // handle(), except that what only the cluster may say (X-Backend-*, X-Timestamp) is kept,
  // since no client wrote it. `env` is the request's own (trans_id, start_time set).
  boost::asio::awaitable<void> handle_internal(common::http::Exchange& ex, ProxyEnv& env);
  const ProxyConfig& config() const;

 private:
  ProxyServer() = default;
  std::unique_ptr<ProxyApp> app_;
  std::unique_ptr<Pipeline> pipeline_;
  bool trans_id_from_pipeline_ = false;  // its first filter is catch_errors
};

}  // namespace apus::proxy
