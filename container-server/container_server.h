// ContainerServer: Swift's container-server HTTP API (swift-protocol.md §9) on a ListingStore.
//
// Container PUT/POST/DELETE/HEAD/GET on /<device>/<partition>/<account>/<container>, object
// rows PUT/DELETE on /<device>/<partition>/<account>/<container>/<object> from object servers
// and updaters, and UPDATE (a JSON list of rows). After a container PUT or DELETE the account
// replicas named in X-Account-Host/-Device/-Partition get the container's new counts, as
// Swift's container server sends them; a failure there is logged and left for the updater.
//
// Thread-safe: handle() runs on any worker; database work runs on the device's pool.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <memory>

#include "common/container_sync_realms.h"
#include "container-server/container_sync.h"
#include "container-server/container_updater.h"
#include "container-server/db_server.h"

namespace apus::container {

class ContainerServer final : public DbServer {
 public:
  // `config` and `devices` must outlive the server. `updater` and `sync` (nullable) run while
  // it serves.
  ContainerServer(const DbServerConfig& config, DbDevices& devices,
                  std::unique_ptr<ContainerUpdater> updater = nullptr,
                  std::unique_ptr<ContainerSync> sync = nullptr);

  // DbServer
  boost::asio::awaitable<void> handle(common::http::Exchange& ex) override;
  void start_background() override;
  void stop_background() override;
  void request_background_pass() override;

 private:
  struct Target;
  boost::asio::awaitable<void> handle_put(common::http::Exchange& ex, const Target& t);
  boost::asio::awaitable<void> handle_delete(common::http::Exchange& ex, const Target& t);
  boost::asio::awaitable<void> handle_post(common::http::Exchange& ex, const Target& t);
  boost::asio::awaitable<void> handle_head(common::http::Exchange& ex, const Target& t);
  boost::asio::awaitable<void> handle_get(common::http::Exchange& ex, const Target& t);
  boost::asio::awaitable<void> handle_update(common::http::Exchange& ex, const Target& t);
  // Swift's 400 for an X-Container-Sync-To it would not sync to, if the request has one.
  std::optional<common::http::Response> bad_sync_to(const common::http::Request& req) const;
  // Merges one object row (PUT or DELETE), auto-creating the container where Swift does. With
  // Waiting::kMay on a pool thread. With kNever on the event loop's thread, into `now_store`
  // (DbDevices::checked_store()), where it answers nullopt, having done nothing, when the row
  // would have to wait (then merge it on the pool).
  std::optional<common::http::Response> put_row(const common::http::Request& req,
                                                const Target& t, const common::Timestamp& ts,
                                                const ObjectRecord& rec, Waiting waiting,
                                                ListingStore* now_store = nullptr);
  // The disk pool of t.device, or Swift's 507 (as HEAD answers it for HEAD) when there is no
  // such device.
  boost::asio::awaitable<common::http::OrRefusal<common::io::BlockingPool*>> device_pool(
      const common::http::Request& req, const Target& t);
  // What Swift refuses before touching a database: 507 for a missing device (or, when the
  // write adds data, one short of space), then the request's policy error. Nullopt: go on.
  boost::asio::awaitable<std::optional<common::http::Response>> refusal(
      const Target& t, const PolicyIndex& policy, bool needs_space);
  // Where a PUT or DELETE asks its account update to go (X-Account-Host, -Device,
  // -Partition), with what the update carries from the request.
  struct AccountUpdate {
    std::vector<std::string> hosts, devices;
    std::string partition;
    std::string path;  // "/<account>/<container>", quoted
    std::string trans_id, referer;
    bool override_deleted = false;
  };
  // The request's account update: nullopt when it asks for none; 400 (Swift's) when its hosts
  // and devices do not pair up.
  common::http::OrRefusal<std::optional<AccountUpdate>> account_update_of(
      const common::http::Request& req, const Target& t) const;
  // Sends the container's counts to its account replicas; a response (404) when Swift would
  // answer with one instead of the container's own (every account replica said 404).
  //
  // account_update_mode = sync (Swift's way) sends it before the PUT or DELETE is answered;
  // async answers first and sends it from the worker meanwhile, at most
  // kMaxAsyncAccountUpdates at a time per server (beyond that it is not sent). Nothing is lost
  // either way, as with the object server's async pendings: the database itself records what
  // its account has not been told (reported_* behind put/delete timestamp and counts), and the
  // container updater's sweep reports every such container. The one difference: an account
  // that is gone cannot turn the container PUT into a 404 (the proxy checks the account
  // before a container PUT in any case).
  boost::asio::awaitable<std::optional<common::http::Response>> send_account_update(
      AccountUpdate update, DbInfo info);
  // Per account_update_mode: sends now and returns Swift's refusal if any, or starts the send
  // and returns nullopt.
  boost::asio::awaitable<std::optional<common::http::Response>> account_update(
      std::optional<AccountUpdate> update, const DbInfo& info);
  static constexpr int kMaxAsyncAccountUpdates = 1024;
  std::atomic<int> async_account_updates_{0};
  common::CounterHandle account_updates_deferred_;  // those over the limit, not sent
  std::atomic<int64_t> deferred_warned_at_{-60};    // steady seconds of the last warning

  const DbServerConfig& config_;
  DbDevices& devices_;
  std::unique_ptr<ContainerUpdater> updater_;
  std::unique_ptr<ContainerSync> sync_;
  // container-sync-realms.conf, for the X-Container-Sync-To values a PUT or POST may set.
  std::shared_ptr<common::ContainerSyncRealms> realms_;
  common::HistogramHandle phase_account_update_;  // apus_db_phase_seconds{phase=account_update}
};

// The container server of a program config (MakeDbServer), with its updater when
// [container-updater] leaves it enabled and swift_dir has an account ring, and its container
// sync when [container-sync] leaves it enabled and swift_dir has a container ring.
common::Result<std::unique_ptr<DbServer>> make_container_server(const common::Config& conf,
                                                                const DbServerConfig& config,
                                                                DbDevices& devices);

}  // namespace apus::container
