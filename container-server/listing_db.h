// ListingStore: the account and container "databases" of one device, kept in one RocksDB.
//
// Swift keeps one SQLite file per account and per container; Apus keeps every one of them in a
// single RocksDB instance per device and server type (`<device>/apus-containers` or
// `<device>/apus-accounts`). Each database (named by its hash_path hex, as Swift names the
// file) is an info record (Swift's container_stat / account_stat row: timestamps, status,
// metadata, per-policy counts) plus its rows (objects of a container, containers of an
// account). Layout and encodings: container-server/FORMAT.md.
//
// Every change to a database runs as one read-modify-write under that database's lock and is
// written as one RocksDB WriteBatch: a row, its replication-sequence entry and the counts it
// changes land together or not at all, so a crash never leaves counts out of step with rows.
// Reads take a snapshot and no lock. Merging follows Swift's rules exactly (newest data,
// content-type and metadata timestamps win independently for objects; newest put and delete
// timestamps for containers in an account).
//
// All calls block on disk: call them from a BlockingPool thread, never from a network worker.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/io/fs.h"
#include "common/status.h"
#include "common/utf8.h"
#include "common/timestamp.h"

namespace apus::container {

enum class DbType { kContainer, kAccount };

// One metadata item as Swift keeps it: {name: [value, internal timestamp]}. An empty value
// marks a deleted item until reclaim.
struct MetaItem {
  std::string value;
  std::string timestamp;
  bool operator==(const MetaItem&) const = default;
};
using DbMetadata = std::map<std::string, MetaItem>;

struct PolicyStat {
  int64_t object_count = 0;
  int64_t bytes_used = 0;
  int64_t container_count = 0;  // accounts only
  bool operator==(const PolicyStat&) const = default;
};

// Swift's container_stat / account_stat row. Timestamps are kept as the strings Swift stores
// (internal form, "0" when unset), since Swift compares some of them as strings.
struct DbInfo {
  std::string account;
  std::string container;  // empty for accounts
  std::string partition;
  std::string created_at;
  std::string put_timestamp = "0";
  std::string delete_timestamp = "0";
  std::string status;  // "" or "DELETED"
  std::string status_changed_at = "0";
  std::string reported_put_timestamp = "0";
  std::string reported_delete_timestamp = "0";
  int64_t reported_object_count = 0;
  int64_t reported_bytes_used = 0;
  std::string hash = std::string(32, '0');  // XOR of every row's MD5 (Swift's chexor)
  std::string id;                           // "<uuid4>-<device>"
  int storage_policy_index = 0;             // containers
  int64_t x_container_sync_point1 = -1;
  int64_t x_container_sync_point2 = -1;
  int64_t container_count = 0;  // accounts: totals over all policies
  int64_t object_count = 0;
  int64_t bytes_used = 0;
  std::map<int, PolicyStat> policy_stats;
  DbMetadata metadata;
  int64_t max_row = -1;  // the newest ROWID given out
  int64_t tombstones = 0;  // deleted rows kept (so reclaim can skip databases without any)
  // Containers: the newest ROWID up to which rows of other policies were queued for the
  // container reconciler (Swift's reconciler_sync_point).
  int64_t reconciler_sync_point = -1;

  // Containers: the counts of the container's own policy (Swift's container_stat view).
  int64_t container_objects() const;
  int64_t container_bytes() const;
  // Swift's _is_deleted_info for each type.
  bool is_deleted(DbType type) const;
  // Accounts: status DELETED or delete_timestamp > put_timestamp (as strings), as Swift's
  // is_status_deleted().
  bool is_status_deleted() const;
  // Containers: no objects in any policy (Swift's empty()); accounts: no containers.
  bool empty(DbType type) const;
  bool operator==(const DbInfo&) const = default;
};

// A container's object row, or an update to one (as Swift's merge_items takes it).
struct ObjectRecord {
  std::string name;
  std::string created_at;  // internal timestamp, or up to three encoded (data, ctype, meta)
  int64_t size = 0;
  std::string content_type;
  std::string etag;
  bool deleted = false;
  int storage_policy_index = 0;
  std::string ctype_timestamp;  // updates only; empty when not given
  std::string meta_timestamp;   // updates only
  int64_t rowid = 0;            // set on rows read back
};

// An account's container row.
struct ContainerRecord {
  std::string name;
  std::string put_timestamp = "0";
  std::string delete_timestamp = "0";
  int64_t object_count = 0;
  int64_t bytes_used = 0;
  bool deleted = false;
  int storage_policy_index = 0;
  int64_t rowid = 0;
};

// One row of Swift's incoming_sync table: the newest ROWID of the replica `remote_id` (a
// database id) whose rows this replica has merged, in the order that replica numbers them. A
// replicator sends rows after it, and then passes its own incoming points on (merge_syncs).
struct SyncPoint {
  std::string remote_id;
  int64_t sync_point = -1;
};

// A listing request, with Swift's parameter meanings (swift-protocol.md §9.3).
struct ListingQuery {
  int64_t limit = 10000;
  std::string marker;
  std::optional<std::string> end_marker;
  std::optional<std::string> prefix;
  std::optional<std::string> delimiter;
  std::optional<std::string> path;  // containers only
  bool reverse = false;
  bool allow_reserved = false;  // names starting with "\x00" listed too
  int storage_policy_index = 0;  // containers only: whose rows to list
};

// One listing entry: a row, or a subdir when `subdir` is set (then only `name` is set).
struct ObjectEntry {
  bool subdir = false;
  ObjectRecord row;
};
struct ContainerEntry {
  bool subdir = false;
  ContainerRecord row;
};

// What a database's rows add up to, recounted from the rows themselves (the DB auditors compare
// it with the counts the info record keeps).
struct RowAudit {
  std::optional<DbInfo> info;        // the info read in the same view; nullopt: no database
  std::map<int, PolicyStat> stats;   // per policy: live objects (or containers) and bytes
  int64_t rows = 0;                  // every row, deleted ones included
  int64_t tombstones = 0;            // deleted rows
  int64_t sequence_entries = 0;      // its "s" keys: one per row
  std::string hash = std::string(32, '0');  // Swift's chexor over the rows
};

// How a write reaches the disk. kStore: as the store's sync_writes says. kUnsynced: in RocksDB's
// WAL in the page cache when the call returns, so a crash of the process keeps it and one of the
// machine may lose it (the next synced write makes it durable with everything before it). That
// is what Swift's container server gives the object rows object servers send: it appends them
// to the database's .pending file without fsync.
enum class WalSync { kStore, kUnsynced };

// Whether a write may wait. kMay: for disk pool threads. kNever: for a caller on an event
// loop's thread, which must not sleep: where the write would wait for a lock another thread
// holds, a read from disk, a reopen of the store, a RocksDB write stall or a WAL fsync, it
// writes nothing and answers Unavailable, and the caller does it again where waiting is
// allowed. What it cannot avoid: queueing behind a RocksDB write another thread has started
// (at most that write, and its fsync), and the kernel pausing its WAL write() when the
// machine's dirty pages are over their limit, as Swift's append to a .pending file would be.
enum class Waiting { kMay, kNever };

struct StoreOptions {
  DbType type = DbType::kContainer;
  bool sync_writes = true;  // fsync the WAL on every write (db_sync_writes)
  // Bytes of free space compactions leave on the device (the server's fallocate_reserve, as
  // bytes): a compaction that would eat into it waits rather than filling the disk.
  uint64_t reserve_bytes = 0;
};

// A full disk: a write that meets ENOSPC (or another I/O error) in RocksDB answers
// InsufficientStorage (so 507, as Swift answers for a full device) and leaves RocksDB refusing
// writes. The store then reopens RocksDB at the first write a second later (writes before that
// answer InsufficientStorage at once), so it takes writes again as soon as space returns,
// without a restart. Reads go on throughout. RocksDB's own log goes to the server's log, never
// to a file on the device.
class ListingStore {
 public:
  // Opens (creating if needed) the store at `path`. IOError when RocksDB cannot open it.
  static common::Result<std::unique_ptr<ListingStore>> open(const std::string& path,
                                                           StoreOptions options);
  // Opens the store at `path` for reading next to the server that writes it (RocksDB's
  // secondary instance: no lock taken, `scratch_dir` holds the follower's own files). It sees
  // the server's writes as of its open and of each catch_up(); its writes fail. For daemons in
  // processes of their own (the account reaper). IOError when RocksDB cannot open it.
  static common::Result<std::unique_ptr<ListingStore>> open_follower(
      const std::string& path, const std::string& scratch_dir, StoreOptions options);
  virtual ~ListingStore() = default;

  // A follower reads what the server wrote since its open or last catch_up(). Others: nothing
  // to do.
  virtual common::Status catch_up() { return common::Status(); }

  DbType type() const { return options_.type; }

  // The info of database `db`, or nullopt when it does not exist. IOError/Corruption.
  virtual common::Result<std::optional<DbInfo>> get_info(std::string_view db) = 0;

  // Up to `limit` databases after `after_db` (exclusive) in name order, with their info: a
  // page of a walk over every database, as the updater and replicator make.
  virtual common::Result<std::vector<std::pair<std::string, DbInfo>>> list_infos(
      std::string_view after_db, size_t limit) = 0;

  // Runs `fn` on database `db`'s info under its lock: `info` is nullopt when the database does
  // not exist, and `fn` may create it by emplacing one. When `fn` returns true the (new) info
  // is written. `fn`'s own failure Status is returned unchanged and nothing is written.
  using InfoUpdate = std::function<common::Result<bool>(std::optional<DbInfo>& info)>;
  virtual common::Status update_info(std::string_view db, const InfoUpdate& fn) = 0;

  // Swift's merge_items for container databases: each record replaces the row of the same
  // (name, policy) only where its timestamps are newer. With `source` (a replicator's batch,
  // in its ROWID order), the incoming sync point of that replica moves up to
  // source->sync_point in the same write. NotFound when `db` does not exist.
  virtual common::Status merge_objects(std::string_view db, std::vector<ObjectRecord> records,
                                       const SyncPoint* source = nullptr,
                                       WalSync sync = WalSync::kStore,
                                       Waiting waiting = Waiting::kMay) = 0;
  // The same for account databases (container rows).
  virtual common::Status merge_containers(std::string_view db,
                                          std::vector<ContainerRecord> records,
                                          const SyncPoint* source = nullptr) = 0;

  // Swift's incoming_sync table of `db` (get_syncs), in remote id order. NotFound when `db`
  // does not exist.
  virtual common::Result<std::vector<SyncPoint>> get_syncs(std::string_view db) = 0;
  // Swift's merge_syncs: each point moves up to the given one (never down). A database keeps
  // at most kMaxSyncPoints of them: InvalidArgument, with nothing written, for more. NotFound
  // when `db` does not exist.
  virtual common::Status merge_syncs(std::string_view db,
                                     const std::vector<SyncPoint>& points) = 0;
  static constexpr size_t kMaxSyncPoints = 1000;

  // Removes database `db` altogether (info, rows, sequence and sync points, in one write),
  // provided it is still the replica a replicator pushed to its primaries: its id is `id` and
  // no row was added since `max_row`. Conflict, with nothing removed, otherwise; NotFound when
  // it does not exist. (A handoff replica's removal: Swift's delete_db after
  // cleanup_post_replicate's max_row check.)
  virtual common::Status remove_db(std::string_view db, std::string_view id, int64_t max_row) = 0;
  // Removes database `db` altogether provided its info is still exactly `expected` (no row,
  // timestamp, status, metadata or count changed): Conflict, with nothing removed, otherwise.
  // NotFound when it does not exist. (A quarantine's removal, after the copy was made.)
  virtual common::Status remove_db_if_unchanged(std::string_view db, const DbInfo& expected) = 0;

  // Swift's reclaim: removes deleted rows older than `age_timestamp` (internal form; objects
  // by created_at, containers by delete_timestamp) and emptied metadata items older than it;
  // a deleted, empty database whose delete_timestamp is older goes entirely. Returns the number
  // of rows removed. NotFound when `db` does not exist.
  virtual common::Result<int64_t> reclaim(std::string_view db,
                                          const std::string& age_timestamp) = 0;

  // Listings as Swift's list_objects_iter / list_containers_iter give them (deleted rows never
  // listed). NotFound when `db` does not exist.
  virtual common::Result<std::vector<ObjectEntry>> list_objects(std::string_view db,
                                                                const ListingQuery& q) = 0;
  virtual common::Result<std::vector<ContainerEntry>> list_containers(std::string_view db,
                                                                      const ListingQuery& q) = 0;

  // Swift's get_items_since for container databases: up to `limit` object rows (every policy,
  // deleted rows included) whose ROWID is greater than `after_rowid`, in ROWID order, each with
  // its name, policy and rowid set; one ordered walk of the `s` sequence keys on a snapshot.
  // NotFound when `db` does not exist; InvalidArgument on an account store.
  virtual common::Result<std::vector<ObjectRecord>> objects_since(std::string_view db,
                                                                  int64_t after_rowid,
                                                                  size_t limit) = 0;

  // Recounts database `db` from its rows (one ordered walk of its rows and one of its sequence
  // entries, in one consistent view). Corruption when a row does not decode.
  virtual common::Result<RowAudit> audit_rows(std::string_view db) = 0;

  // Checks every block of every file of the store against its checksum (RocksDB's
  // VerifyChecksum: reads the whole store). Corruption naming what failed.
  virtual common::Status verify_checksums() = 0;

  // objects_since for account databases: container rows in ROWID order.
  virtual common::Result<std::vector<ContainerRecord>> containers_since(std::string_view db,
                                                                        int64_t after_rowid,
                                                                        size_t limit) = 0;

  // Swift's set_x_container_sync_points: sets the container's sync points (a nullopt leaves
  // that point as it is), provided the container still syncs to `sync_to` (its stored
  // X-Container-Sync-To value): Conflict, with nothing written, when that changed (a new
  // Sync-To resets both points, which a sync pass begun before must not undo). NotFound when
  // `db` does not exist.
  common::Status set_sync_points(std::string_view db, std::string_view sync_to,
                                 std::optional<int64_t> point1, std::optional<int64_t> point2);

 protected:
  explicit ListingStore(StoreOptions options) : options_(options) {}
  StoreOptions options_;
};

// The stores of this node's devices, read as a follower (ListingStore::open_follower) by a
// daemon in a process of its own (the account reaper, the replicators) while the server
// writes them. Their scratch files go to a temporary directory of this process, removed with
// this object. Thread-compatible.
class FollowedStores {
 public:
  // `devices_dir` holds the devices (Swift's `devices`); `fs` must outlive this.
  FollowedStores(std::string devices_dir, DbType type, common::io::Fs& fs);
  ~FollowedStores();
  FollowedStores(const FollowedStores&) = delete;
  FollowedStores& operator=(const FollowedStores&) = delete;

  // The store of `device`, caught up with the server's latest write; nullptr when the device
  // holds none or it cannot be read (logged).
  ListingStore* follow(const std::string& device);

 private:
  const std::string devices_dir_;
  const DbType type_;
  common::io::Fs& fs_;
  std::string scratch_dir_;  // made at the first open
  std::map<std::string, std::unique_ptr<ListingStore>> stores_;  // by device
};

using common::timestamp_or_zero;

// Swift's chexor: `old_hash` XOR MD5("<name>-<timestamp>"), as 32 hex characters.
std::string chexor(std::string_view old_hash, std::string_view name, std::string_view timestamp);

using common::increment_last_char;

// Swift's update_new_item_from_existing: folds `existing` into `update` (newest data, content
// type and meta timestamps win) and encodes the result's created_at. Returns false when
// nothing in `update` is newer, so the existing row stays.
bool merge_object_record(ObjectRecord& update, const ObjectRecord* existing);

}  // namespace apus::container
