// AccountReaper: deletes everything in accounts marked deleted, as swift-account-reaper does.
// A reseller's DELETE of an account only marks its database (status DELETED, a
// delete_timestamp); the reaper then deletes the account's objects and containers through the
// storage servers, and the emptied database is later reclaimed (db_server.h's Reclaimer).
//
// It runs as its own process (apus-account-reaper, configured by [account-reaper] of
// account-server.conf with Swift's options) and reads the account server's RocksDB stores as a
// follower (ListingStore::open_follower): the server keeps writing them meanwhile, and each
// pass first catches up with its writes.
//
// The algorithm is Swift's. Per device (mount-checked), per account database that is marked
// deleted and still lists containers, if this device is one of the account's primaries (its
// ip one of bind_ip's addresses, port bind_port and device name; handoff copies are left to
// the primaries) and the delete is older than `delay_reaping` seconds:
//  - the account's containers are split among its primaries: a container is this node's when
//    int(md5(container) as hex) modulo the number of primaries equals this node's index;
//  - per container (sqrt(concurrency) at a time): its object listing from the last of its
//    primaries, in pages, each object DELETEd on all of its primaries (sqrt(concurrency) at a
//    time) with X-Timestamp = now, the container update asked of one container primary each,
//    and the container's storage policy; then the container DELETEd on each of its primaries,
//    each asked to update one of the account's primaries with X-Account-Override-Deleted: yes
//    (an account server refuses other updates of a deleted account).
//  - an object or container counts as deleted when more replicas said 2xx than failed,
//    remaining when none did, possibly remaining otherwise (Swift's counters).
// Every backend request goes to the replication addresses (X-Backend-Use-Replication-Network).
//
// Cadence and cost: run_forever() waits a random part of `interval` (default 3600 s) before
// the first pass, then starts a pass every `interval` seconds. A pass with nothing to reap
// reads each device's account infos once (a walk of the store's info keys, 1000 per page); an
// account being reaped costs one listing page per 10000 objects, a DELETE per object replica
// and per container replica.
//
// Thread-compatible: run_once()/run_forever() are called by one thread, which runs the network
// side on its own io_context.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/io/fs.h"
#include "common/statsd.h"
#include "common/status.h"
#include "ring/ring.h"

namespace apus::container {

struct ReaperConfig {
  std::string devices = "/srv/node";
  bool mount_check = true;
  std::string swift_dir = "/etc/swift";
  std::string bind_ip = "0.0.0.0";
  int bind_port = 6202;             // 0: any port of this host's addresses is this node
  double interval = 3600;           // seconds between the starts of two passes
  double node_timeout = 10;         // seconds, per backend answer
  double conn_timeout = 0.5;        // seconds, per backend connection
  int concurrency = 25;             // containers and objects in flight: sqrt of it each
  double delay_reaping = 0;         // seconds after the account's delete before reaping it
  double reap_warn_after = 2592000; // seconds (plus delay_reaping) before "not reaped" warnings
  std::string log_name = "account-reaper";
  // Swift's reaper metrics (containers_/objects_ deleted, remaining, possibly_remaining and
  // failures, return_codes.<class>, timing per account); set by load_daemon from log_statsd_*.
  common::StatsdHandle statsd;
  common::SwiftConf swift;

  // [account-reaper] of an account-server.conf (DEFAULT inherited), and swift.conf from
  // swift_dir. InvalidArgument for bad values.
  static common::Result<ReaperConfig> from_config(const common::Config& conf);
};

// Swift's counters, summed over a pass.
struct ReaperStats {
  uint64_t accounts_reaped = 0;  // accounts a pass worked on
  uint64_t containers_deleted = 0;
  uint64_t containers_remaining = 0;
  uint64_t containers_possibly_remaining = 0;
  uint64_t objects_deleted = 0;
  uint64_t objects_remaining = 0;
  uint64_t objects_possibly_remaining = 0;
  std::map<int, uint64_t> return_codes;  // by class: 2 for 2xx, 4 for 4xx...
};

// Which of an account's `node_count` primaries reaps `container`: int(md5(container) as hex)
// modulo node_count. REQUIRES: node_count > 0.
size_t reaper_container_shard(std::string_view container, size_t node_count);

class AccountReaper {
 public:
  // `object_rings` by policy index. `fs` must outlive this.
  AccountReaper(ReaperConfig config, common::io::Fs& fs, std::unique_ptr<ring::Ring> account_ring,
                std::unique_ptr<ring::Ring> container_ring,
                std::map<int, std::unique_ptr<ring::Ring>> object_rings);
  ~AccountReaper();

  // One pass over every device; blocks until it is done. Failures are logged and counted.
  ReaperStats run_once();
  // Passes until `stop` is set (checked every second while waiting).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::container
