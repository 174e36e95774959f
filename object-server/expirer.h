// ObjectExpirer: deletes objects whose X-Delete-At has come, reading the queue the object
// servers keep (common/expiring_queue.h: the `.expiring_objects` account, containers named by
// time, rows `<delete-at>-<account>/<container>/<object>`), as swift-object-expirer 2.30 does,
// so that Swift's and Apus's expirers, proxies and object servers can be mixed.
//
// Swift's expirer talks to the cluster through an in-process proxy (InternalClient on the
// replication network). Apus's has no proxy inside: it makes the same backend requests that
// proxy would, through the rings, on the devices' replication addresses:
//  - HEAD of the queue account (its container count; nothing to do when 0),
//  - GET listings of the account and of each queue container whose time has come, in pages,
//  - per row: the target container's HEAD (its storage policy, once per container and pass),
//    then a DELETE of the object on its primaries (handoffs for failed ones) with
//    X-Timestamp = X-If-Delete-At = the row's delete-at and
//    X-Backend-Clean-Expiring-Object-Queue: no, with the container updates the proxy would ask
//    for, judged by the proxy's quorum rules (best_response, 404 counting as 204 without a
//    quorum). 2xx and 409 (a newer write) remove the row; 404 and 412 (not there, or its
//    X-Delete-At changed) remove it only once the delete-at is older than `reclaim_age`; other
//    answers leave it for the next pass. An `application/async-deleted` row (SLO's async
//    delete) is deleted without X-If-Delete-At, and 404 and 409 remove it too.
//  - the row's removal: a DELETE straight to every replica of its queue container (Swift's
//    direct_delete_container_entry), and a queue container found empty is deleted.
// With `processes` > 0, this process takes only the rows whose md5("<container>/<row>") %
// processes == process.
//
// Cadence and cost: run_forever() waits a random part of `interval` before the first pass and
// a random part of what remains of `interval` after each pass (as Swift does: on average a pass
// starts every interval/2 or so). A pass over an empty queue costs one HEAD to an account
// server; otherwise one listing page per 1000 rows and per queue container, plus, per expired
// row, one container HEAD (once per target container), one DELETE per object replica and one
// per queue container replica, paced at `tasks_per_second` and `concurrency` at a time.
//
// Thread-compatible: run_once()/run_forever() are called by one thread, which runs the network
// side on its own io_context.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/statsd.h"
#include "common/status.h"

namespace apus::object {

struct ExpirerConfig {
  std::string swift_dir = "/etc/swift";
  double interval = 300;         // seconds; see the file comment for the cadence
  double report_interval = 300;  // seconds between progress lines within a pass
  int concurrency = 1;           // deletes in flight at once
  int64_t processes = 0;         // how many expirers share the queue (0: this one alone)
  int64_t process = 0;           // which of them this is, 0-based
  int64_t reclaim_age = 604800;  // seconds after which an undeletable row is given up
  double tasks_per_second = 50;  // rows per second at most; 0 = unlimited
  int request_tries = 3;         // tries of a request answered 5xx or not at all
  double conn_timeout = 0.5;     // seconds, per backend connection
  double node_timeout = 10;      // seconds, per backend answer
  bool dequeue_from_legacy = true;  // false: this node does nothing (see from_config)
  std::string expiring_objects_account = ".expiring_objects";
  std::string log_name = "object-expirer";
  // Swift's expirer metrics (objects, errors, timing per task); set from log_statsd_* by the
  // program.
  common::StatsdHandle statsd;
  // Where object.recon gets object_expiration_pass and expired_last_pass for swift-recon.
  std::string recon_cache_path = "/var/cache/swift";
  common::SwiftConf swift;

  // Swift 2.30's reading: [object-expirer] of `conf` (DEFAULT inherited), loaded from `path`.
  // A file whose path holds "expirer" (object-expirer.conf) is the legacy layout: it also
  // holds the proxy settings ([app:proxy-server]: swift_dir, conn_timeout, node_timeout) and
  // always dequeues. Otherwise (an object-server.conf's section) dequeue_from_legacy defaults
  // to false and the proxy settings come from internal_client_conf_path
  // (/etc/swift/internal-client.conf; when that default is missing, from this file).
  // InvalidArgument for bad values (concurrency < 1, process >= processes...).
  static common::Result<ExpirerConfig> from_config(const common::Config& conf,
                                                   const std::string& path);
  // The command line's --processes / --process overrides, checked as Swift checks them.
  common::Status set_processes(std::optional<int64_t> processes, std::optional<int64_t> process);
};

// Swift's best_response() on the statuses of one request per node (a 503 for a node that never
// answered): for 2xx, 3xx and 4xx in that order, the highest status of the first class that
// holds `quorum` of them; with `override_404` (a DELETE), when none does, 404s count as 204s
// (without ever being the answer); else 503.
int best_status(const std::vector<int>& statuses, size_t quorum, bool override_404);

struct ExpirerStats {
  uint64_t objects = 0;  // rows done: object deleted (or given up) and row removed
  uint64_t errors = 0;   // rows left for a later pass
  uint64_t skipped = 0;  // rows that belong to another process
  uint64_t containers_deleted = 0;  // empty queue containers removed
};

class ObjectExpirer {
 public:
  explicit ObjectExpirer(ExpirerConfig config);
  ~ObjectExpirer();

  // One pass over the queue. Blocks until it is done. Rings that cannot be read are logged and
  // end the pass.
  ExpirerStats run_once();
  // Passes until `stop` becomes true (checked once a second).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::object
