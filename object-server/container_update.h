// Container updates: after an object PUT, POST or DELETE the object server tells the container
// replicas (and, for X-Delete-At changes, the expiring-objects queue) about the new row, as
// Swift's object server does (swift-protocol.md §6, §7.6). An update that cannot be delivered
// is saved as an async pending on the object's device, for apus-object-updater (or Swift's) to
// deliver later.
//
// This unit builds updates from a request's backend headers (pure functions), the request a
// container replica gets (shared with the updater, which sends saved updates the same way), and
// UpdateSender, which delivers an update or saves it.
//
// Thread-safety: the functions are pure. UpdateSender is thread-safe: send() may run on any
// worker at once; it holds configuration and references only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"
#include "common/http/headers.h"
#include "common/http/server.h"
#include "common/io/blocking_pool.h"
#include "common/status.h"
#include "common/timestamp.h"
#include "object-server/async_pending.h"
#include "object-server/diskfile.h"

namespace apus::object {

// One change of a container row, for every replica in `targets`.
struct ContainerUpdate {
  std::string op;  // "PUT" or "DELETE"
  std::string account, container, object;  // the row: a/c/o, or the queue's row
  std::string container_partition;
  std::vector<std::pair<std::string, std::string>> targets;  // ("ip:port", container device)
  // "<account>/<container>" of the shard container the update goes to instead of the root
  // (the proxy's X-Backend-Quoted-Container-Path for an object of a sharded Swift container);
  // kept in the async pending as Swift keeps it.
  std::optional<std::string> container_path;
  common::http::HeaderMap headers;
  // The object's device and policy: where its async pending goes.
  std::string device;
  int policy = 0;

  // The container the row goes to: container_path's, else account/container.
  std::pair<std::string, std::string> target_container() const;
  // What names its async pending: X-Meta-Timestamp, else X-Timestamp.
  std::string pending_timestamp() const;
  // The async pending Swift saves for it: header names title-cased as its HeaderKeyDict.
  AsyncUpdate to_async_update() const;
};

// Where a container server's 301 sends an update (Swift's get_redirect_data): the shard's
// "<account>/<container>" from Location's path (unquoted when X-Backend-Location-Is-Quoted) and
// X-Backend-Redirect-Timestamp. nullopt, logged naming `what`, when either is missing or bad.
std::optional<std::pair<std::string, common::Timestamp>> redirect_of(
    const common::http::HeaderMap& h, std::string_view what);

// The request a container replica gets for a row change (also the updater's):
// <op> /<device>/<partition>/<account>/<container>/<object>, names quoted.
common::http::ClientRequest make_update_request(std::string op, std::string_view device,
                                                std::string_view partition,
                                                std::string_view account,
                                                std::string_view container,
                                                std::string_view object,
                                                common::http::HeaderMap headers);

// The update of `loc`'s container row for a request (its X-Container-Host, -Device and
// -Partition, and the shard from X-Backend-Quoted-Container-Path or X-Backend-Container-Path:
// one not of the form "account/container" is logged and the root updated, as in Swift);
// `headers` are the row's (X-Size, X-Etag...). nullopt when there is nobody to tell
// (no host or partition) or the host and device lists differ (logged), as in Swift.
std::optional<ContainerUpdate> container_update_for(const common::http::Request& req,
                                                    const Location& loc, std::string op,
                                                    common::http::HeaderMap headers);

// Where expiring objects are queued: Swift's expiring_objects_account and
// expiring_objects_container_divisor.
struct ExpiringQueue {
  std::string account = ".expiring_objects";
  int64_t container_divisor = 86400;
};

// The expiring-objects queue row for `loc` expiring at `delete_at` (PUT adds it, DELETE removes
// it), for a request at `timestamp`; `object_hash` is loc's (the queue container's shard).
// nullopt when this server has no part in it: replication requests, a PUT without
// X-Delete-At-Host (other object servers carry it), a DELETE with
// X-Backend-Clean-Expiring-Object-Queue false. An X-Delete-At-Container that is not a number
// is replaced by the best guess Swift makes when the proxy sends none (Swift answers 500).
std::optional<ContainerUpdate> delete_at_update_for(const common::http::Request& req,
                                                    const Location& loc,
                                                    const common::Timestamp& timestamp,
                                                    std::string op, int64_t delete_at,
                                                    std::string_view object_hash,
                                                    const ExpiringQueue& queue);

// Writes `update`'s async pending under its device (Swift's name and pickle). Pool thread.
common::Status save_async_pending(DiskFileManager& disk, const ContainerUpdate& update);

// Delivers updates to container replicas, or saves them as async pendings.
class UpdateSender {
 public:
  struct Options {
    double conn_timeout = 0.5;  // seconds, per replica
    double node_timeout = 3.0;
    bool async_mode = false;  // container_update_mode = async: save, never send
  };
  // The disk pool of a device that has passed its device check.
  using PoolFor = std::function<common::io::BlockingPool&(const std::string& device)>;

  // `disk` must outlive the sender.
  UpdateSender(Options options, DiskFileManager& disk, PoolFor pool_for)
      : options_(options), disk_(disk), pool_for_(std::move(pool_for)) {}

  // Sync mode: sends to every target at once and waits up to `wait_seconds` for them (they
  // carry on afterwards), saving an async pending for each that fails. Async mode, or no
  // target: saves the async pending at once. Failures are logged, never returned.
  boost::asio::awaitable<void> send(std::shared_ptr<const ContainerUpdate> update,
                                    double wait_seconds);

 private:
  boost::asio::awaitable<void> deliver(std::shared_ptr<const ContainerUpdate> update,
                                       size_t target);
  boost::asio::awaitable<void> save(std::shared_ptr<const ContainerUpdate> update);

  Options options_;
  DiskFileManager& disk_;
  PoolFor pool_for_;
};

}  // namespace apus::object
