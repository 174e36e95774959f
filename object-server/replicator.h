// apus-object-replicator: object replication as Swift's object replicator does it, with
// sync_method = rsync (Swift's default) or ssync (swift-protocol.md §16.1-16.2).
//
// A pass takes every partition directory of every local device (a ring device whose
// replication address and port are this node's, Swift's whataremyips and bind_port) under
// every policy's ring, and replicates it as below, `concurrency` partitions at once (a thread
// each); passes start every `interval` seconds. An idle pass costs a REPLICATE per partition and
// peer, whose answer the peer reads from hashes.pkl. Stats are logged at INFO per pass and
// written to object.recon in recon_cache_path as Swift's replicator writes them.
//
// A primary partition: its suffix hashes (get_hashes) are compared with each other primary's
// (REPLICATE /<dev>/<part>); suffixes that differ are rehashed here, compared again, sent, and
// the peer is told to rehash them (REPLICATE /<dev>/<part>/<s1>-<s2>...). A peer whose device
// is unmounted (507) counts as a failure and the next handoff takes its place.
//
// Sending: with ssync, an SSYNC request per peer (ssync_sender.cpp). With rsync, Swift's
// command: `rsync --recursive --whole-file --human-readable --xattrs --itemize-changes
// --ignore-existing --timeout=T --contimeout=T --bwlimit=B --exclude=.*.XXXXXX <suffix dirs>
// <rsync_module>/<device>/<objects dir>/<partition>` into the peer's rsync daemon (Debian's
// rsync, a module over its devices directory), killed after rsync_timeout.
//
// A handoff partition: every suffix goes to every primary; once all of them (or handoff_delete
// of them) took it, the objects are removed here. Safer than Swift, which removes the whole
// partition directory: only the hash directories still exactly as they were offered (ssync)
// or as they were when the rsync began are removed, so a write that landed here during the
// sync stays for the next pass.
//
// Blocking disk I/O (and the rsync command) inline: run on an io_context of the replicator's
// own, one per partition thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/config/config.h"
#include "common/config/swift_conf.h"
#include "common/http/client.h"
#include "common/statsd.h"
#include "ring/ring.h"
#include "object-server/diskfile.h"
#include "object-server/ssync.h"

namespace apus::object {

struct PartitionJob {
  Location part;                         // device, partition and policy here
  int region = 1;                        // the local device's
  bool primary = true;                   // this device is one of the partition's primaries
  std::vector<ssync::SyncTarget> nodes;  // the other primaries (all of them for a handoff)
  // A primary's stand-ins, in ring order (not this node's devices): a peer whose device is
  // unmounted (507) is replaced by the next of these, as Swift's replicator does.
  std::vector<ssync::SyncTarget> handoffs;
};

// sync_method = rsync: how the rsync command runs (Swift's options of the same names).
struct RsyncOptions {
  double timeout = 900;     // rsync_timeout: the whole command, then it is killed
  std::string io_timeout = "30";  // rsync_io_timeout: rsync's --timeout and --contimeout, as written
  std::string bwlimit = "0";
  bool compress = false;    // --compress, for peers in another region only
  bool log_transfers = true;   // log_rsync_transfers: each file sent, at DEBUG
  size_t error_line_length = 0;  // rsync_error_log_line_length: error lines cut there (0: not)
};

struct ReplicationOptions {
  common::http::ClientOptions client;  // conn_timeout, node_timeout
  double http_timeout = 60;            // REPLICATE answers
  // A handoff partition goes once this many primaries took it (0: all of them).
  int handoff_delete = 0;
  // Set: suffixes go with rsync to each peer's rsync_module; unset: with SSYNC.
  std::optional<RsyncOptions> rsync;
};

// Swift's rsync_module_interpolation: `{ip}`, `{port}`, `{replication_ip}`,
// `{replication_port}`, `{region}`, `{zone}`, `{device}` and `{meta}` of `dev` in `module`
// (IPv6 addresses in brackets). InvalidArgument for another name or a stray brace.
common::Result<std::string> rsync_module_interpolation(std::string_view module,
                                                       const ring::Device& dev);

struct PartitionOutcome {
  int synced = 0;        // peers now in step (compared equal or sent to)
  int failed = 0;        // peers that could not be reached or refused
  int hashmatch = 0;     // peers whose suffix hashes matched already
  int suffixes_synced = 0;
  size_t objects_removed = 0;  // handoff objects removed after the primaries took them
  bool partition_removed = false;
};

// Replicates one partition (see above).
boost::asio::awaitable<PartitionOutcome> replicate_partition_impl(DiskFileManager& disk,
                                                                  PartitionJob job,
                                                                  ReplicationOptions options);
inline boost::asio::awaitable<PartitionOutcome> replicate_partition(DiskFileManager& disk,
                                                                    PartitionJob job,
                                                                    ReplicationOptions options) {
  return replicate_partition_impl(disk, std::move(job), std::move(options));
}

// ---- The daemon ----

struct ReplicatorConfig {
  std::string devices = "/srv/node";
  bool mount_check = true;
  std::string swift_dir = "/etc/swift";
  std::string bind_ip = "0.0.0.0";  // which ring devices are this node's
  int bind_port = 6200;
  double interval = 30;  // seconds between the starts of two passes
  int concurrency = 1;   // partitions replicated at once
  double node_timeout = 10;
  double conn_timeout = 0.5;
  double http_timeout = 60;
  int64_t reclaim_age = 604800;
  bool handoffs_first = false;  // handoff partitions before primaries in a pass
  int handoff_delete = 0;       // 0: "auto", every primary
  double ring_check_interval = 15;  // seconds between checks of the ring files for a change
  std::string rsync_module;     // empty: sync_method = ssync
  RsyncOptions rsync;
  std::string recon_cache_path = "/var/cache/swift";
  std::string log_name = "object-replicator";
  // Swift's replicator metrics (partition.update/delete.count.<device> and .timing,
  // suffix.syncs); set by load_daemon from log_statsd_*.
  common::StatsdHandle statsd;
  common::SwiftConf swift;

  // Reads [object-replicator] of an object-server.conf (DEFAULT inherited) and its swift.conf.
  // sync_method is ssync by default here (Swift's default is rsync, which needs an rsync
  // daemon on every node; say sync_method = rsync to use it).
  static common::Result<ReplicatorConfig> from_config(const common::Config& conf);
};

struct ReplicationStats {
  uint64_t attempted = 0;  // partitions
  uint64_t success = 0;    // peer syncs that worked (or found the peer in step)
  uint64_t failure = 0;
  uint64_t hashmatch = 0;
  uint64_t suffix_sync = 0;
  uint64_t removed = 0;           // handoff objects removed
  uint64_t handoffs_removed = 0;  // handoff partitions removed
  double seconds = 0;
};

// Which devices and partitions a pass takes (--devices, --partitions); empty: all.
struct PassFilter {
  std::set<std::string> devices;
  std::set<std::string> partitions;
};

class ObjectReplicator {
 public:
  // `fs` must outlive the replicator. `rings`: policy index -> object ring.
  ObjectReplicator(ReplicatorConfig config, common::io::Fs& fs,
                   std::map<int, std::unique_ptr<ring::Ring>> rings);
  ~ObjectReplicator();

  // One pass; blocks until it is done.
  ReplicationStats run_once(const PassFilter& filter = {});
  // Passes every `interval` seconds until `stop` becomes true (checked once a second).
  void run_forever(const std::atomic<bool>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace apus::object
