// ContainerController: requests to /v1/<account>/<container> (Swift's
// proxy/controllers/container.py): GET and HEAD from one container replica at a time (listings
// pass through; listing_formats turns them into the client's format), PUT, POST and DELETE to
// every replica by quorum, each replica telling its share of the account replicas. CORS and
// OPTIONS against the container's own settings. Private to proxy/.
//
// Thread-compatible: one per request, on its worker thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "proxy/controllers/base.h"
#include "proxy/shard_ranges.h"

namespace apus::proxy {

class ContainerController final : public Controller {
 public:
  using Controller::Controller;

  boost::asio::awaitable<void> handle(common::http::Exchange& ex, ProxyEnv& env) override;

 private:
  // The request once OPTIONS and CORS are dealt with.
  boost::asio::awaitable<void> serve(common::http::Exchange& ex, ProxyEnv& env);
  // GET and HEAD. `early` is the denial of the first authorize(), which the container's read
  // ACL may still lift.
  boost::asio::awaitable<void> read(common::http::Exchange& ex, ProxyEnv& env, uint32_t part,
                                    std::optional<common::http::Response> early);
  // A listing of a sharded container, gathered from its shards as Swift's proxy gathers it
  // (_get_from_shards): `root` is the container's answer of shard ranges, `headers` what asked
  // for it. Each shard is asked for the names of its range from the last one listed, until
  // the limit; a shard that is sharded in turn is followed unless it was visited already.
  // The JSON listing (503 when a shard fails or lists another policy).
  struct ShardListing {
    std::vector<std::pair<std::string, std::string>> history;  // (account, container) read
    int depth = 0;
    int64_t budget = 0;  // shard requests left for this listing
  };
  // Shard requests one listing may make (a shard per request; Swift has no bound).
  static constexpr int64_t kMaxShardRequests = 10000;
  boost::asio::awaitable<common::http::Response> listing_from_shards(
      const common::http::Request& req, const common::http::HeaderMap& headers,
      common::http::Response root, ShardListing& listing);
  // One shard's part of the listing (its `query`), its own shard ranges followed when
  // `follow` and it is sharded in turn.
  boost::asio::awaitable<common::http::Response> shard_listing(
      const common::http::Request& req, const common::http::HeaderMap& headers,
      const ShardRange& range, const std::string& query, bool follow, ShardListing& listing);
  // PUT, POST and DELETE, once authorized.
  boost::asio::awaitable<void> write(common::http::Exchange& ex, ProxyEnv& env, uint32_t part);
  // UPDATE (private): the request body's rows, merged by every replica of the container.
  boost::asio::awaitable<void> update(common::http::Exchange& ex, ProxyEnv& env, uint32_t part);
  // The account's info for a write; under account_autocreate a PUT creates a missing account
  // first. The refusal when there is no account to write in.
  boost::asio::awaitable<common::http::OrRefusal<CachedInfo>> account_for_write(
      const common::http::Request& req, const ProxyEnv& env);
  // 403 when a PUT would go over max_containers_per_account.
  boost::asio::awaitable<std::optional<common::http::Response>> over_container_limit(
      const common::http::Request& req, const ProxyEnv& env, const CachedInfo& account);
};

}  // namespace apus::proxy
