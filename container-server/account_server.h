// AccountServer: Swift's account-server HTTP API (swift-protocol.md §10) on a ListingStore.
//
// Account PUT/POST/DELETE/HEAD/GET on /<device>/<partition>/<account> and container rows PUT
// on /<device>/<partition>/<account>/<container> from container servers and updaters, with
// per-policy counts and Swift's status codes (201/202, 403 "Recently deleted", 404 with
// X-Account-Status: Deleted for a deleted account, which the proxy turns into 410).
//
// Thread-safe: handle() runs on any worker; database work runs on the device's pool.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "container-server/db_server.h"

namespace apus::container {

class AccountServer final : public DbServer {
 public:
  // `config` and `devices` must outlive the server.
  AccountServer(const DbServerConfig& config, DbDevices& devices);

  // DbServer
  boost::asio::awaitable<void> handle(common::http::Exchange& ex) override;

 private:
  struct Target;
  // What a GET lists and the content type of a GET or HEAD, checked before the pool job.
  struct Listing {
    ListingParams params;  // HEAD: only the format
    std::string content_type;
  };
  // Each runs on the device's pool thread and returns the whole answer.
  common::http::Response put_account(const common::http::Request& req, const Target& t);
  common::http::Response put_container_row(const common::http::Request& req, const Target& t);
  common::http::Response delete_account(const common::http::Request& req, const Target& t);
  common::http::Response post_account(const common::http::Request& req, const Target& t);
  common::http::Response head_or_get(const common::http::Request& req, const Target& t,
                                     const Listing& listing);

  const DbServerConfig& config_;
  DbDevices& devices_;
};

// The account server of a program config (MakeDbServer).
common::Result<std::unique_ptr<DbServer>> make_account_server(const common::Config& conf,
                                                              const DbServerConfig& config,
                                                              DbDevices& devices);

}  // namespace apus::container
