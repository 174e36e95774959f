// apus-container-replicator and apus-account-replicator: Swift's database replicator
// (common/db_replicator.py) over Apus's listing stores, speaking Swift's REPLICATE protocol
// (container-server/db_replication.h) to Apus and Swift servers alike.
//
// It runs as a process of its own, configured by [container-replicator] or
// [account-replicator] with Swift's options, and reads the server's RocksDB stores as a
// follower (FollowedStores): everything it writes goes through REPLICATE requests, to peers
// and, for the removal of its own handoff replicas, to its own server.
//
// A pass walks every database of every local device (a ring device whose replication address
// is one of bind_ip's and whose port is bind_port) in name order, and replicates each as
// Swift's _replicate_object does:
//  - its partition by the ring; a replica under another partition, or on a device that is not
//    one of the partition's primaries, is a handoff: it goes to every primary and is then
//    removed (all of them, or `handoff_delete` of them, took it, and no row came meanwhile);
//  - a primary replica goes to the other primaries, starting with the next one in ring order
//    (each node feeds a different peer first, Swift's footnote [1]); a peer whose device is
//    unmounted (507) is replaced by the next handoff;
//  - per peer: "sync"; in step when the peer's point for our id reaches our max_row or the
//    hashes match; else our rows after the peer's point, `per_diff` at a time, at most
//    `max_diffs` batches (the rest next pass), then our incoming sync points ("merge_syncs").
//    A peer without the database: an Apus peer makes an empty replica ("apus_create_db"); a
//    Swift peer, which takes new replicas only as whole SQLite files, gets the backend PUT a
//    proxy would send (the replica's put timestamp and policy, no account update) and a
//    second "sync" for the metadata and timestamps; then either takes every row.
//
// Sleeps, not sweeps (the cost of an idle cluster): a database whose replica is unchanged
// (same id, max_row, hash, timestamps, status, policy and metadata) since every peer last
// confirmed it is skipped without a request, until `recheck_interval` (default 1 hour) has
// passed since that confirmation; a peer that lost its copy meanwhile (a replaced disk) is
// refilled at the latest then. `--once` and the first pass of a process compare every
// database. An idle pass therefore reads each database's info once from RocksDB (about a
// microsecond each) and sends nothing. Passes start every `interval` seconds (default 30);
// databases replicated (not skipped) are paced to `databases_per_second` (default 50), and
// `concurrency` (default 8) of them are in flight at once.
//
// Stats: Swift's counters (attempted, success, failure, no_change, hashmatch, diff,
// diff_capped, remove, empty, ts_repl...) logged at INFO per pass and written to
// container.recon / account.recon in recon_cache_path as Swift's replicator writes them.
//
// Thread-compatible: run_once()/run_forever() from one thread, which runs the network side on
// an io_context of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/io/fs.h"
#include "common/statsd.h"
#include "common/status.h"
#include "container-server/listing_db.h"
#include "ring/ring.h"

namespace apus::container {

struct DbReplicatorConfig {
  DbType type = DbType::kContainer;
  std::string devices = "/srv/node";
  bool mount_check = true;
  std::string swift_dir = "/etc/swift";
  std::string bind_ip = "0.0.0.0";
  int bind_port = 6201;  // 6202 for accounts
  double interval = 30;  // seconds between the starts of two passes
  int concurrency = 8;   // databases in flight
  double databases_per_second = 50;
  double node_timeout = 10;
  double conn_timeout = 0.5;
  int per_diff = 1000;   // rows per merge_items
  int max_diffs = 100;   // merge_items per peer and pass
  int handoff_delete = 0;  // 0: every primary must take a handoff replica before it goes
  double reclaim_age = 604800;  // deleted, empty databases older than this are left alone
  double recheck_interval = 3600;  // see the file comment
  std::string recon_cache_path = "/var/cache/swift";
  std::string log_name;
  // Swift's replicator metrics (attempts, successes, failures, no_changes, hashmatches, diffs,
  // diff_caps, rsyncs, removes.<device>, timing); set by load_daemon from log_statsd_*.
  common::StatsdHandle statsd;
  common::SwiftConf swift;

  // [container-replicator] of a container-server.conf or [account-replicator] of an
  // account-server.conf (DEFAULT inherited), and swift.conf from swift_dir. InvalidArgument
  // for bad values.
  static common::Result<DbReplicatorConfig> from_config(const common::Config& conf, DbType type);
  // "container" or "account".
  std::string kind() const;
};

// Swift's replicator counters of one pass.
struct DbReplicationStats {
  uint64_t attempted = 0;  // databases replicated (not skipped)
  uint64_t skipped = 0;    // unchanged since every peer confirmed them
  uint64_t success = 0;    // peer syncs that ended in step
  uint64_t failure = 0;
  uint64_t no_change = 0;  // peers already in step by sync point
  uint64_t hashmatch = 0;  // peers in step by hash
  uint64_t diff = 0;       // peers sent rows
  uint64_t diff_capped = 0;  // ... and left more than max_diffs batches behind
  uint64_t created = 0;    // replicas made on peers that lacked them
  uint64_t remove = 0;     // handoff replicas removed here
  uint64_t rows_sent = 0;
  uint64_t misplaced_queued = 0;  // rows of other policies queued for the reconciler
  double seconds = 0;
};

// Which devices and partitions a pass takes (--devices, --partitions); empty: all.
struct DbPassFilter {
  std::set<std::string> devices;
  std::set<std::string> partitions;
};

class DbReplicator {
 public:
  // `ring` is the container or account ring; `fs` must outlive this.
  DbReplicator(DbReplicatorConfig config, common::io::Fs& fs, std::unique_ptr<ring::Ring> ring);
  ~DbReplicator();

  // One pass comparing every database; blocks until it is done.
  DbReplicationStats run_once(const DbPassFilter& filter = {});
  // Passes every `interval` seconds until `stop` is set (checked every second while waiting).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::container
