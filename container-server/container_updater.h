// ContainerUpdater: reports each container's counts to its account replicas when they changed
// since the last report, as swift-container-updater does. The container server sends the same
// report at once after every container PUT and DELETE; this sweep catches the row updates in
// between and any report that failed.
//
// A RocksDB store has one writer process, so the sweep runs inside apus-container-server (a
// thread started with the server, configured by [container-updater]) instead of a separate
// process reading the databases. A pass walks every device's databases in pages; a container
// is reported when put/delete timestamps or counts differ from what was last reported (read
// again just before its report: a page may be seconds old by then), to the
// account ring's nodes (their replication addresses), `concurrency` at a time and at most
// `containers_per_second`. A majority of 2xx answers records the report; a 404 from every
// replica (the account is gone) quarantines the container (quarantine_db, as Swift's updater
// does); otherwise the account is left alone for `account_suppression_time`. An idle pass
// reads each database's info once.
//
// Thread-safe: start()/stop() from the controlling thread; the sweep runs on its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "common/config/config.h"
#include "common/periodic_thread.h"
#include "common/statsd.h"
#include "common/thread_annotations.h"
#include "container-server/db_server.h"
#include "ring/ring.h"

namespace apus::container {

struct ContainerUpdaterConfig {
  bool enabled = true;
  double interval = 300;  // seconds between the starts of two passes
  int concurrency = 4;
  double node_timeout = 3;
  double conn_timeout = 0.5;
  double containers_per_second = 50;  // 0 = unlimited
  double account_suppression_time = 60;
  // Where container.recon gets container_updater_sweep (the last pass's seconds).
  std::string recon_cache_path = "/var/cache/swift";
  // Swift's container-updater metrics (successes, failures, no_changes, timing), under its
  // log_name, from [container-updater]'s log_statsd_*.
  common::StatsdHandle statsd;

  // Reads [container-updater] of a container-server.conf (DEFAULT inherited); `enabled` is
  // Apus's own option (default true).
  static common::Result<ContainerUpdaterConfig> from_config(const common::Config& conf);
};

struct ContainerUpdaterStats {
  uint64_t successes = 0;   // reports a majority of account replicas took
  uint64_t failures = 0;    // reports that failed (account suppressed for a while)
  uint64_t no_changes = 0;  // containers already reported
};

class ContainerUpdater {
 public:
  // `server` and `devices` must outlive the updater.
  ContainerUpdater(ContainerUpdaterConfig config, const DbServerConfig& server,
                   DbDevices& devices, std::unique_ptr<ring::Ring> account_ring);
  ~ContainerUpdater();  // stops the thread

  // One pass over every device; blocks until it is done.
  ContainerUpdaterStats run_once();
  // Starts passes every `interval` seconds on a thread of its own (the first after a random
  // part of one interval, as Swift spreads its daemons).
  void start();
  void stop();
  // The next pass starts now, or right after the one under way (the server's SIGUSR2: what
  // `swift-container-updater once` is to Swift's daemon). Any thread.
  void run_now() { thread_.run_now(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  common::PeriodicThread thread_;
};

}  // namespace apus::container
