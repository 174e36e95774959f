// ContainerSync: pushes the object rows of containers that have X-Container-Sync-To and
// X-Container-Sync-Key to the container they name, as swift-container-sync does, so another
// cluster (stock Swift or Apus, through its container_sync proxy middleware) keeps a copy.
//
// A RocksDB store has one writer process, so the sync runs inside apus-container-server (a
// thread started and stopped with the server, next to the container updater), configured by
// [container-sync] of container-server.conf with Swift's options. Cadence and cost: a pass
// starts every `interval` seconds (the first after a random part of one interval) and walks
// every device's databases in pages; a database that is not synced (no Sync-To or Sync-Key,
// or deleted) costs that one info read. A synced container is worked on only by its primary
// container servers (this server's ip, port and device among the container ring's nodes for
// it), for at most `container_time` seconds per pass, then the pass moves on and resumes there
// next time.
//
// The algorithm is Swift's. Each container keeps two sync points (rowids, -1 at first, reset
// when Sync-To changes). Rows after sync_point1 are split among the container's primaries: a
// row is this node's when the first 4 bytes of hash_path(account, container, name), big-endian,
// modulo the number of primaries, equal this node's index among them; sync_point1 then moves to
// the newest row looked at. Rows between sync_point2 and sync_point1 (the ones each node left
// to the others last time) are all sent by every node, which is cheap when the others did
// their share: before a PUT the remote object is HEADed and an object with the same or a newer
// X-Timestamp is left alone. sync_point2 stops before the first row that failed, so a failed
// row is tried again on the next pass. The points are written every kPointFlushRows rows and
// at the end of each stage (Swift writes them at every row); a crash in between only repeats
// a few rows, which the remote HEAD makes cheap.
//
// Per row: a deleted row becomes a DELETE with its tombstone's X-Timestamp (404 and 409 from
// the remote count as done). A live row becomes a HEAD, then a GET of the local object and a
// PUT of it to the remote. The GET goes straight to the object servers of the policy's ring
// (their replication addresses): every primary is asked (a handoff replaces one that fails)
// and the newest X-Timestamp wins, as Swift's X-Newest; the winner's body streams into the
// remote PUT through one 64 KiB buffer, so memory does not grow with the object. The PUT
// carries the object's headers but Date and Last-Modified, backend headers and (transient)
// sysmeta, with the ETag unquoted, swift_bytes dropped from Content-Type, and symlink sysmeta shown as
// X-Symlink-Target/-Account/-Etag/-Bytes (what Swift's ?symlink=get GET shows), so the remote
// stores the link, not its target. Object-versioning links and containers with versioning
// sysmeta are skipped, as Swift does. Each remote request carries X-Timestamp and
// `X-Container-Sync-Auth: <realm> <nonce> <sig>` (the realm's key and the container's sync
// key; for a full-URL Sync-To, X-Container-Sync-Key). PUT and DELETE are tried again after 5xx
// or network errors (5 more times, waiting 1, 2, 4, 5, 5 s, as Swift's client); a 4xx is a
// failure at once.
//
// Not like Swift: only http:// endpoints (and sync_proxy URLs); an https:// Sync-To is logged
// as an error and counted as a failure for its container at every pass. A handoff copy of a
// container does not sync (Swift's node only checks ip and port, so it may sync a handoff
// database it holds on another device of the same server).
//
// Thread-safe: start()/stop() from the controlling thread; passes run on their own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/config/config.h"
#include "common/container_sync_realms.h"
#include "common/hash_path.h"
#include "common/http/headers.h"
#include "common/periodic_thread.h"
#include "common/thread_annotations.h"
#include "container-server/db_server.h"
#include "ring/ring.h"

namespace apus::container {

struct ContainerSyncConfig {
  bool enabled = true;
  double interval = 300;                  // seconds between the starts of two passes
  double container_time = 60;             // seconds a pass spends on one container at most
  double conn_timeout = 5;                // seconds for each remote connect, read and write
  int request_tries = 3;                  // local object GET attempts
  std::vector<std::string> sync_proxies;  // http://host:port of forward proxies; empty = none
  // The local object GETs (Swift's internal client: internal_client_conf_path's
  // [app:proxy-server]).
  double local_conn_timeout = 0.5;
  double local_node_timeout = 10;
  std::string swift_dir = "/etc/swift";

  // Reads [container-sync] of a container-server.conf (DEFAULT inherited); `enabled` is
  // Apus's own option (default true). InvalidArgument for bad values or an
  // internal_client_conf_path that cannot be read.
  static common::Result<ContainerSyncConfig> from_config(const common::Config& conf);
};

// Swift's counters, summed over a pass.
struct ContainerSyncStats {
  uint64_t syncs = 0;     // containers whose pass ended without an error
  uint64_t deletes = 0;   // DELETEs the remote took
  uint64_t puts = 0;      // PUTs the remote took
  uint64_t bytes = 0;     // bytes of those PUTs (the rows' sizes)
  uint64_t skips = 0;     // containers skipped (versioning, no key)
  uint64_t failures = 0;  // rows or containers that failed
};

// ---- the pieces of the algorithm, for tests -------------------------------------------------

// Which of a container's `node_count` primaries sends row `name` in the first stage: the
// big-endian first 4 bytes of hash_path(account, container, name) modulo node_count.
// REQUIRES: node_count > 0 and a non-empty container.
size_t sync_row_owner(const common::HashPathConfig& hash, std::string_view account,
                      std::string_view container, std::string_view name, size_t node_count);

// The headers of the remote PUT made from an object server's GET answer (see the header
// comment). Content-Length is left out: the caller frames the body.
common::http::HeaderMap sync_put_headers(const common::http::HeaderMap& object_headers);

// An http:// or https:// URL split as the sync uses it: host (brackets removed), port
// (default 80/443), path (as written, may be empty).
struct HttpUrl {
  bool https = false;
  std::string host;
  uint16_t port = 80;
  std::string authority;  // host[:port] as written, for the Host header
  std::string path;
};
common::Result<HttpUrl> parse_http_url(std::string_view url);

class ContainerSync {
 public:
  // `server`, `devices` must outlive this. `realms` is the server's container-sync-realms.conf.
  ContainerSync(ContainerSyncConfig config, const DbServerConfig& server, DbDevices& devices,
                std::shared_ptr<common::ContainerSyncRealms> realms,
                std::unique_ptr<ring::Ring> container_ring);
  ~ContainerSync();  // stops the thread

  // One pass over every device; blocks until it is done.
  ContainerSyncStats run_once();
  // Passes every `interval` seconds on a thread of its own.
  void start();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  common::PeriodicThread thread_;
};

}  // namespace apus::container
