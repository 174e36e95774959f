// ObjectUpdater: delivers async pendings (container updates saved by object servers, Swift's or
// ours) to the container servers the container ring names, as swift-object-updater does.
//
// A pass walks every device's async_pending[-N] directories; per object only the newest
// pending file matters (older ones are removed), as in Swift. Each update goes to every
// container replica that has not taken it yet; the file is removed only when all of them
// answered 2xx, otherwise the replicas that did are recorded in it ('successes') for the next
// pass. `concurrency` updates are in flight at once; passes start every `interval` seconds; an
// idle pass costs one directory listing per device and policy.
//
// Thread-compatible: run_once()/run_forever() are called by one thread, which runs the
// network side; file I/O goes to a BlockingPool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/io/fs.h"
#include "common/statsd.h"
#include "common/status.h"
#include "ring/ring.h"

namespace apus::object {

struct UpdaterConfig {
  std::string devices = "/srv/node";
  bool mount_check = true;
  std::string swift_dir = "/etc/swift";
  double interval = 300;     // seconds between the starts of two passes
  int concurrency = 8;       // updates in flight at once
  double node_timeout = 10;  // Swift's updater defaults
  double conn_timeout = 0.5;
  double objects_per_second = 50;  // per pass; 0 = unlimited
  std::string log_name = "object-updater";
  // Swift's updater metrics (successes, failures, unlinks, errors, redirects, timing); set by
  // load_daemon from log_statsd_*.
  common::StatsdHandle statsd;
  // Where object.recon gets object_updater_sweep (the last pass's seconds) for swift-recon.
  std::string recon_cache_path = "/var/cache/swift";
  common::SwiftConf swift;

  // Reads [object-updater] of an object-server.conf (DEFAULT inherited) and its swift.conf.
  static common::Result<UpdaterConfig> from_config(const common::Config& conf);
};

struct UpdaterStats {
  uint64_t successes = 0;  // updates delivered to every replica (file removed)
  uint64_t failures = 0;   // updates some replica refused (file kept)
  uint64_t unlinks = 0;    // files removed: delivered or superseded by a newer one
  uint64_t errors = 0;     // unreadable files (quarantined) and other trouble
  uint64_t redirects = 0;  // updates a container server sent to a shard (301), followed
};

// The async pendings waiting on the devices under `devices`, every policy's directory, counted
// as swift-recon-cron counts them (the entries of each async_pending*/<suffix>/ directory).
uint64_t count_async_pendings(common::io::Fs& fs, const std::string& devices);

// swift-recon-cron's work: that count into <recon_cache_path>/object.recon as async_pending,
// with async_pending_last (the Unix time), where swift-recon reads it. The object updater does
// it after each pass, so recon needs no cron job with Apus; apus-recon-cron does it alone.
common::Status write_async_pending_recon(common::io::Fs& fs, const std::string& devices,
                                         const std::string& recon_cache_path);

class ObjectUpdater {
 public:
  // `fs` must outlive the updater.
  ObjectUpdater(UpdaterConfig config, common::io::Fs& fs, std::unique_ptr<ring::Ring> container_ring);
  ~ObjectUpdater();

  // One pass over every device. Blocks until the pass is done.
  UpdaterStats run_once();
  // Passes every `interval` seconds until `stop` becomes true (checked once a second).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::object
