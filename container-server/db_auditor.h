// apus-container-auditor and apus-account-auditor: Swift's database auditors
// (common/db_auditor.py) over Apus's listing stores, and more, since a store keeps counts next
// to rows where Swift's SQLite keeps them by triggers.
//
// A process of its own, configured by [container-auditor] or [account-auditor] with Swift's
// options, reading the servers' RocksDB stores as a follower (FollowedStores). A pass visits
// every database of every mounted device and, unless it is deleted, recounts it from its rows
// (ListingStore::audit_rows) and compares (audit_problem()):
//  - per storage policy, the live objects and bytes (containers) or the containers, objects
//    and bytes (accounts) the info keeps with what the rows add up to;
//  - the deleted rows kept, the hash (Swift's chexor over the rows), and one replication
//    sequence entry per row;
//  - accounts: the totals equal the sum over policies (Swift's account auditor's check).
// A database that differs is logged as Swift logs it ("Audit Failed for ...") and counted; the
// store is not changed. Each store's RocksDB checksums are verified in full once every
// `checksum_interval` seconds (Apus's own; default a day), which reads the whole store.
//
// Cadence and cost: passes start every `interval` seconds (Swift's default 1800); databases are
// paced to `containers_per_second` / `accounts_per_second` (Swift's default 200) and rows to
// `rows_per_second` (Apus's own, default 50000: a container of ten million rows takes 200 s).
// The pacing is per database: a database's rows are recounted in one read, then the pass
// sleeps for what they cost, so one huge container is a burst followed by a pause. The
// checksum verification is not paced and reads the whole store (a failed one waits its
// interval too; the time of the last one is kept in memory only, so a restart verifies again).
// Stats go to container.recon / account.recon as Swift's auditors write them.
//
// Thread-compatible: run_once()/run_forever() from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "common/config/config.h"
#include "common/io/fs.h"
#include "common/statsd.h"
#include "common/status.h"
#include "container-server/listing_db.h"

namespace apus::container {

struct DbAuditorConfig {
  DbType type = DbType::kContainer;
  std::string devices = "/srv/node";
  bool mount_check = true;
  double interval = 1800;           // seconds between the starts of two passes
  double dbs_per_second = 200;      // containers_per_second / accounts_per_second (0: unpaced)
  double rows_per_second = 50000;   // rows recounted per second (0: unpaced)
  double checksum_interval = 86400; // seconds between full checksum checks of a store (0: never)
  std::string recon_cache_path = "/var/cache/swift";
  std::string log_name;
  // Swift's DB auditor metrics (passes, failures, errors, timing per database); set by
  // load_daemon from log_statsd_*.
  common::StatsdHandle statsd;

  // [container-auditor] of a container-server.conf or [account-auditor] of an
  // account-server.conf (DEFAULT inherited). InvalidArgument for bad values.
  static common::Result<DbAuditorConfig> from_config(const common::Config& conf, DbType type);
  std::string kind() const;
};

// What differs between a database's info and its rows (empty: nothing), in words for the log.
std::string audit_problem(const RowAudit& audit, DbType type);

struct DbAuditStats {
  uint64_t passed = 0;   // databases whose counts agree with their rows
  uint64_t failed = 0;   // databases that differ, or could not be read
  uint64_t rows = 0;     // rows recounted
  uint64_t stores_verified = 0;  // stores whose checksums were checked in full this pass
  uint64_t checksum_failures = 0;
  double seconds = 0;
};

class DbAuditor {
 public:
  // `fs` must outlive this.
  DbAuditor(DbAuditorConfig config, common::io::Fs& fs);
  ~DbAuditor();

  // One pass over every mounted device (or those in `devices`); blocks until it is done.
  DbAuditStats run_once(const std::set<std::string>& devices = {});
  // Passes every `interval` seconds until `stop` is set; a pass stops between databases.
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::container
