// Swift's database replication protocol, both sides (swift-protocol.md; Swift's
// common/db_replicator.py ReplicatorRpc and the container/account replicators that call it).
//
// A replicator sends `REPLICATE /<device>/<partition>/<hash>` with a JSON array body, the
// operation's name first, to the peer's replication address:
//  - ["sync", max_row, hash, id, created_at, put_timestamp, delete_timestamp, metadata
//    (, status_changed_at, count, storage_policy_index)]: the peer merges the sender's metadata
//    and timestamps (and a better storage policy index) into its replica, and answers 200 with
//    its replica's info as JSON, "point" being the newest of the sender's ROWIDs it has merged;
//    404 when it has no such database.
//  - ["merge_items", rows, sender_id]: rows as Swift's get_items_since gives them (with ROWID),
//    in ROWID order; the peer merges them and moves its point for sender_id to the last one.
//  - ["merge_syncs", [{"remote_id", "sync_point"}...]]: the sender's own incoming points.
//  - ["complete_rsync", sender_id(, name)] and ["rsync_then_merge", sender_id]: the SQLite file
//    a Swift replicator rsynced to <device>/tmp/<sender_id> is merged into the store (a new
//    replica, or into the one here; container-server/swift_db.h) and removed.
//  - ["get_shard_ranges"] answers [] (Apus containers never shard); ["merge_shard_ranges", ...]
//    is refused with 501.
//  - Apus's own, sent only to Apus servers (a 404 answer to "sync" from an Apus server says it
//    takes them with X-Apus-Db-Replication: 1): ["apus_create_db", {...}] makes an empty replica
//    with the sender's names, timestamps, status, policy and metadata (the rows follow by
//    merge_items), in place of Swift's rsync of the whole file; ["apus_remove_db", id,
//    max_row] removes a replica that is still exactly the one a replicator pushed (its own
//    handoff copy, through its own server: the replicator only reads the store);
//    ["apus_merge_info", {a "sync" answer}] merges a peer's metadata, timestamps and policy
//    into the replica here (what Swift's replicator does to its own database with a peer's
//    answer; an Apus replicator asks its own server); ["apus_reconciler_sync", point] records
//    how far the replica's rows of other policies were queued for the container reconciler.
//
// Safer than Swift: the body is bounded (32 MiB), the path must name a partition number and a
// 32-digit hash (and a created replica's names must hash to it), rows must have valid UTF-8
// names, and a database keeps at most ListingStore::kMaxSyncPoints sync points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/status.h"
#include "container-server/db_server.h"
#include "container-server/listing_db.h"

namespace apus::container {

// A peer's answer to "sync": what the replicator reads of the peer's replica.
struct RemoteInfo {
  int64_t point = -1;  // the newest of our ROWIDs the peer has merged
  int64_t max_row = -1;
  std::string hash;
  std::string id;
  std::string created_at = "0";
  std::string put_timestamp = "0";
  std::string delete_timestamp = "0";
  std::string status_changed_at = "0";
  int64_t count = 0;  // objects (containers) or containers (accounts)
  std::optional<int> storage_policy_index;
  DbMetadata metadata;
  // Swift's container servers since sharding answer shard_max_row; its replicator counts a
  // peer without it as a failure. Apus answers -1.
  std::optional<int64_t> shard_max_row;
};

// The header an Apus server's 404 to "sync" carries: it takes "apus_create_db".
inline constexpr std::string_view kApusDbReplicationHeader = "X-Apus-Db-Replication";

// ---- request bodies (a replicator's side) ----

// ["sync", ...] for our replica. Container replicas add status_changed_at, count and policy
// when the cluster has several policies, as Swift's container replicator does.
std::string sync_request(const DbInfo& info, DbType type, bool several_policies);
// ["merge_items", rows, local_id].
std::string merge_items_request(const std::vector<ObjectRecord>& rows, std::string_view local_id);
std::string merge_items_request(const std::vector<ContainerRecord>& rows,
                                std::string_view local_id);
// ["merge_syncs", [{"remote_id": ..., "sync_point": ...}...]].
std::string merge_syncs_request(const std::vector<SyncPoint>& points);
// ["apus_create_db", {...}] and ["apus_remove_db", id, max_row].
std::string create_db_request(const DbInfo& info, DbType type);
std::string remove_db_request(std::string_view id, int64_t max_row);
// ["apus_reconciler_sync", point].
std::string reconciler_sync_request(int64_t point);
// A JSON array of object rows: an UPDATE body (what parse_object_rows() reads).
std::string object_rows_body(const std::vector<ObjectRecord>& rows);

// A "sync" answer's body; InvalidArgument when it is not one.
common::Result<RemoteInfo> parse_sync_answer(std::string_view body);
// ["apus_merge_info", answer]: a peer's "sync" answer passed to our own server, which merges
// the peer's metadata, timestamps and policy into our replica.
std::string merge_info_request(std::string_view sync_answer);

// Swift's incorrect_policy_index: whether a peer's storage policy index should replace ours
// (cmp_policy_info: the newest of recreated replicas, else the oldest, deleted ones last).
bool remote_policy_wins(const DbInfo& local, const RemoteInfo& remote);

// Swift's merge of another replica's state into ours (_handle_sync_request, merge_timestamps,
// update_metadata): a better storage policy index (containers, when `remote` has one), the
// other's newer metadata items, and its timestamps (created_at the older, put and delete the
// newer, compared as the strings they are, as SQLite's MIN and MAX do), status_changed_at
// moving when that changes whether the replica counts as deleted. Returns whether anything
// changed.
bool merge_remote_info(DbInfo& info, DbType type, const RemoteInfo& remote);

// ---- checks of what a peer says (in JSON or in a database file it sent) ----

// A timestamp as a peer sends it (kept as its text, compared as text): at most this long.
inline constexpr size_t kMaxTimestamp = 100;
// A row's content type or etag: Swift's header limit.
inline constexpr size_t kMaxRowText = 8192;
// A peer's raw metadata (a JSON object): Swift's own limits keep user metadata to a few KiB;
// sysmeta adds some. More than this is refused rather than written into every info record.
inline constexpr size_t kMaxMetadataJson = 1 << 20;
bool good_timestamp(std::string_view s);
// An account, container or object name: not empty, UTF-8.
bool good_name(std::string_view s);
// A replica id (Swift's "<uuid4>-<device>"): it becomes part of a store key and of log lines,
// so printable ASCII only, and at most 256 bytes.
bool good_id(std::string_view s);
// A row's names, timestamps, texts and policy index.
bool good_row(const ObjectRecord& r);
bool good_row(const ContainerRecord& r);

// A database's metadata as Swift keeps it (a JSON object of name -> [value, timestamp]);
// items that are not pairs of strings are dropped, an undecodable text gives none (Swift logs
// undecodable metadata and goes on without it).
DbMetadata metadata_from_json(std::string_view raw);
// The other way: Swift's raw metadata column ("" when there is none).
std::string metadata_json(const DbMetadata& md);

// ---- the server's side ----

// Answers a REPLICATE request on a container or account server (config.type).
boost::asio::awaitable<void> serve_replicate(common::http::Exchange& ex,
                                             const DbServerConfig& config, DbDevices& devices);

// An UPDATE body: a JSON array of object rows as Swift's merge_items takes them (name,
// created_at, size, content_type, etag, deleted, storage_policy_index, ctype_timestamp,
// meta_timestamp), or nullopt when malformed.
std::optional<std::vector<ObjectRecord>> parse_object_rows(std::string_view body);

// <devices>/<device>/tmp: where a Swift replicator rsyncs a database for complete_rsync or
// rsync_then_merge to take, and what the DB replicators sweep of crash leftovers each pass.
std::string device_tmp_dir(std::string_view devices, std::string_view device);

}  // namespace apus::container
