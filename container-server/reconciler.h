// ContainerReconciler: moves objects that were written in a storage policy other than their
// container's into the container's, working off the queue the container replicator fills
// (common/misplaced_queue.h), as swift-container-reconciler 2.30 does, so that Swift's and
// Apus's replicators, reconcilers and servers can be mixed.
//
// Like Swift's, it works on objects through an internal client (proxy/internal_client.h: a
// proxy pipeline in this process, from the [pipeline:main] of its own config file, on the
// replication network) and talks straight to the container servers for two things: the
// container's policy and the removal of a queue row.
//
// A pass lists the queue: the container of the current hour first (the updaters have not
// reported it yet), then the queue account's containers, newest first. For each row (Swift's
// _reconcile_object):
//  - the container's policy is the one a majority of its primaries agree on by Swift's
//    cmp_policy_info (HEAD of each; a 404 still tells its policy); without a majority the row
//    waits for a later pass. Answers are kept for 30 s (Swift's CONTAINER_POLICY_TTL).
//  - a row of the container's own policy needs nothing;
//  - neither policy may be in a partition power increase (its ring has next_part_power);
//  - the object is HEADed in the container's policy: when that holds it (or a tombstone) at or
//    after the row's time, only the old copy goes: a DELETE in the row's policy at the row's
//    time + 1 offset (404 counts as done);
//  - else the object is read from the row's policy: a 404 of a queued DELETE becomes a DELETE in
//    the container's policy at the row's time + 2 offsets; a copy at or after the row's time is
//    PUT into the container's policy with its own headers at max(its time, the row's) + 2
//    offsets, the body streaming from the GET through a bounded buffer; then the old copy is
//    deleted as above. A source that is missing or older waits for a later pass, and is given
//    up (logged CRITICAL) once the row is older than `reclaim_age`.
//  - a row that is done is removed from every primary of its queue container, with X-Timestamp
//    = max(queued, row time) + 1 offset. A queue container found empty and older than
//    reclaim_age is deleted.
// With `processes` > 0, this process takes only the rows whose int(hash_path(a, c, o), 16)
// % processes == process.
//
// Cadence and cost: run_forever() makes a pass, then sleeps `interval` (30 s), as Swift does.
// A pass over an empty queue costs a listing of the current hour's container and of the queue
// account through the internal client (a few backend requests each); each row costs up to one
// HEAD per container primary (cached 30 s), an object HEAD, a GET and a PUT of the object when
// it moves, a DELETE of the old copy and one DELETE per queue replica, `concurrency` rows at a
// time.
//
// Thread-compatible: run_once()/run_forever() from one thread. Each pass runs on a thread of its
// own, on the reconciler's io_context (the proxy's per-thread pools go with that thread, before
// the io_context they were made on).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/misplaced_queue.h"
#include "common/status.h"
#include "common/timestamp.h"

namespace apus::container {

struct ReconcilerConfig {
  std::string config_path;  // the file; it also holds the internal client's pipeline
  std::string swift_dir = "/etc/swift";
  double interval = 30;             // seconds of sleep between passes
  int64_t reclaim_age = 604800;     // seconds after which an unworkable row is given up
  int request_tries = 3;            // tries of an internal client request answered 5xx
  int concurrency = 1;              // rows worked on at once
  int64_t processes = 0;            // how many reconcilers share the queue (0: this one alone)
  int64_t process = 0;              // which of them this is, 0-based
  double ring_check_interval = 15;  // seconds between checks of the ring files
  double conn_timeout = 5;          // direct requests: Swift's direct_client defaults
  double response_timeout = 15;
  std::string log_name = "container-reconciler";
  common::SwiftConf swift;

  // Swift 2.30's reading: [container-reconciler] of `conf` (DEFAULT inherited), loaded from
  // `path`. InvalidArgument for bad values (concurrency < 1, process >= processes...).
  static common::Result<ReconcilerConfig> from_config(const common::Config& conf,
                                                      const std::string& path);
};

// Swift's slightly_later_timestamp(): `t` with its offset moved on by `offset`.
common::Timestamp slightly_later(const common::Timestamp& t, uint64_t offset = 1);

// Counts of what a pass did, by Swift's stats names (success, retry, pop_queue, noop_object,
// copy_success, cleanup_success, unavailable_source, lost_source, invalid_record...).
using ReconcilerStats = std::map<std::string, uint64_t>;

class ContainerReconciler {
 public:
  // Builds the internal client from the config file's pipeline and loads the container ring.
  static common::Result<std::unique_ptr<ContainerReconciler>> create(
      ReconcilerConfig config, const common::Config& conf);
  ~ContainerReconciler();

  // One pass over the queue. Blocks until it is done.
  ReconcilerStats run_once();
  // Passes until `stop` becomes true (checked between rows, and once a second while sleeping).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  explicit ContainerReconciler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::container
