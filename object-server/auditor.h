// apus-object-auditor: finds objects whose bytes or metadata went bad on disk and quarantines
// them as Swift's object auditor does (swift-protocol.md §7.8, §16.6), so that the replicator
// refills them from the other replicas and no client is served the bad bytes.
//
// A pass walks every object of every device and policy (partition, suffix, hash directory,
// in name order). Opening an object checks its metadata (readable, checksummed, named, its
// size the Content-Length): DiskFileManager quarantines what fails. The ALL pass also reads
// each object whole and compares its MD5 with the stored ETag; the ZBF pass ("zero byte
// files") looks only at empty objects, which cost no read. Passes are paced: at most
// files_per_second objects (zero_byte_files_per_second for ZBF) and bytes_per_second bytes,
// so an idle cluster's auditor sleeps most of the time. run_forever runs ZBF passes and ALL
// passes side by side (a thread each, as Swift forks the two), each starting every `interval`
// seconds: an empty object found bad need not wait for a long ALL pass to end.
//
// A quarantined object goes to <dev>/quarantined/objects[-N]/<hash> and its suffix is marked
// for rehashing, so the next replicator pass sees the difference and sends the good copy.
// Stats go to object.recon (object_auditor_stats_ALL / _ZBF) as Swift writes them. A pass keeps
// the partitions it has left per device in Swift's auditor_status_<ALL|ZBF>.json, so a
// restarted auditor resumes there.
//
// Thread-compatible: run_once and run_forever are called by one thread (run_forever starts one
// more for its ZBF passes); every call here blocks on disk I/O.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/io/fs.h"
#include "common/statsd.h"
#include "common/status.h"

namespace apus::object {

struct AuditorConfig {
  std::string devices = "/srv/node";
  bool mount_check = true;
  std::string swift_dir = "/etc/swift";
  double interval = 30;
  double files_per_second = 20;
  double zero_byte_files_per_second = 50;
  double bytes_per_second = 10000000;
  int64_t reclaim_age = 604800;
  std::string recon_cache_path = "/var/cache/swift";
  std::string log_name = "object-auditor";
  // Swift's auditor metrics (errors, quarantines, timing per object); set by load_daemon from
  // log_statsd_*.
  common::StatsdHandle statsd;
  common::SwiftConf swift;

  // Reads [object-auditor] of an object-server.conf (DEFAULT inherited) and its swift.conf.
  static common::Result<AuditorConfig> from_config(const common::Config& conf);
};

struct AuditStats {
  uint64_t passes = 0;        // objects found good
  uint64_t quarantined = 0;   // objects moved to quarantine in this pass
  uint64_t errors = 0;        // disk errors met
  uint64_t bytes = 0;         // bytes read
  double seconds = 0;
};

enum class AuditMode { kAll, kZeroByte };

class ObjectAuditor {
 public:
  // `fs` must outlive the auditor.
  ObjectAuditor(AuditorConfig config, common::io::Fs& fs);
  ~ObjectAuditor();

  // One pass over `devices` (all when empty); blocks until it is done.
  AuditStats run_once(AuditMode mode, const std::set<std::string>& devices = {});
  // ZBF and ALL passes side by side, each every `interval` seconds, until `stop` (checked at
  // least once a second).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::object
