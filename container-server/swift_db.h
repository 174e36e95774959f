// Swift's SQLite container and account databases (one `<hash>.db` file each), read with
// Debian's libsqlite3 and merged into a listing store: what a REPLICATE "complete_rsync" or
// "rsync_then_merge" does with the file a Swift replicator sent by rsync, and what a migration
// from a Swift node does with the files on its disks.
//
// Read: the stat row (container_stat, a view in newer schemas, or account_stat) with Swift's
// older schemas' missing columns taken as their defaults, the rows in ROWID order (deleted ones
// too) and the incoming_sync table. The file is opened read-only; nothing is written to it.
//
// Thread-compatible: one reader per thread. Blocks on disk: call from a pool thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/hash_path.h"
#include "common/io/fs.h"
#include "common/status.h"
#include "container-server/listing_db.h"

namespace apus::container {

class SwiftDbReader {
 public:
  // Opens `path` read-only. NotFound when missing; InvalidArgument when it is not a Swift
  // database of `type` (no stat row).
  static common::Result<std::unique_ptr<SwiftDbReader>> open(const std::string& path,
                                                             DbType type);
  virtual ~SwiftDbReader() = default;

  // The stat row as an info: names, timestamps, status, hash, id, policy, metadata, reported
  // values (counts are the file's, for comparison; a store computes its own from the rows).
  virtual const DbInfo& info() const = 0;
  // The newest ROWID given out (SQLite's sequence; -1 for none).
  virtual int64_t max_row() const = 0;
  // The incoming_sync table.
  virtual const std::vector<SyncPoint>& incoming_syncs() const = 0;
  // Up to `limit` rows whose ROWID is greater than `after`, in ROWID order, rowid set.
  virtual common::Result<std::vector<ObjectRecord>> objects_after(int64_t after, size_t limit) = 0;
  virtual common::Result<std::vector<ContainerRecord>> containers_after(int64_t after,
                                                                        size_t limit) = 0;
  // The ROWID of the last row the latest *_after() call read, kept or skipped (-1 before).
  virtual int64_t last_rowid() const = 0;
  // Rows skipped so far: they fail the checks a peer's rows get (good_row()).
  virtual int64_t skipped_rows() const = 0;
};

// Merges the Swift database file at `path` into database `db` of `store`:
//  - when `db` does not exist (`create`), it is made with the file's names, timestamps, status,
//    policy and metadata and a new id for `device` (Swift's complete_rsync and newid; its
//    reported values start at 0, so the container reports itself again);
//  - when it exists, the file's metadata and timestamps are merged into it (rsync_then_merge);
// then every row of the file, 1000 per write; then the file's incoming sync points and
// `sender_id`'s point at the file's last ROWID (newid's), so the sender goes on from there.
// Container sync points are not taken (they are ROWIDs of the sender's numbering). Returns the
// rows merged. NotFound when `db` is missing and `create` is false, Conflict when it exists and
// `create` is true.
// A file from a peer is checked as its JSON would be: a stat row with bad names, timestamps,
// status, policy or metadata over kMaxMetadataJson is InvalidArgument, and so are names that do
// not hash to `db` ("<partition>/<hash>") when `names_must_hash` is given; rows failing
// good_row() are skipped (and logged), sync points with bad ids dropped.
common::Result<int64_t> merge_swift_db(const std::string& path, ListingStore& store,
                                       std::string_view db, std::string_view device,
                                       std::string_view sender_id, bool create,
                                       const common::HashPathConfig* names_must_hash);

// Writes database `db` of `store` (whose info is `info`, read just before) as a new Swift
// database file at `path`: the stat row, policy_stat, every row up to info.max_row
// with its ROWID (deleted rows too), the AUTOINCREMENT sequence at info.max_row and the
// incoming sync points. The tables and columns are Swift's, so swift-container-info and
// swift-account-info read the file and SwiftDbReader (apus-db-import) takes it back; the stat
// row is a table holding the counts (Swift's schema before policies had this shape) and there
// are no triggers: the file is a record, not a database to serve. SQLite syncs it at its
// commit (synchronous = FULL); the caller makes its name durable.
common::Status write_swift_db(const std::string& path, ListingStore& store, std::string_view db,
                              const DbInfo& info);

// Swift's DatabaseBroker.quarantine for a listing store: database `db` leaves `store` for
// `<device_path>/quarantined/<containers|accounts>/<hash>/<hash>.db` (write_swift_db into
// `<device_path>/tmp`, fsynced, renamed durably; a `-<random hex>` suffix on the directory when
// one of that name exists, as Swift does), then is removed from the store, provided its info
// did not change meanwhile (Conflict otherwise, with the file removed and the database left as
// it was). NotFound when `db` does not exist.
// Logged at ERROR with `reason`, as Swift does. Returns the directory made.
common::Result<std::string> quarantine_db(ListingStore& store, common::io::Fs& fs,
                                          std::string_view db, const std::string& device_path,
                                          std::string_view reason);

// The records of a Swift database's `.pending` file (rows written since its last commit:
// base64 pickles separated by ':'): object rows for containers, container rows for accounts,
// with Swift's older tuple lengths. Entries that do not decode are skipped and counted in
// *bad (Swift logs and skips them too).
struct PendingRows {
  std::vector<ObjectRecord> objects;
  std::vector<ContainerRecord> containers;
  size_t bad = 0;
};
PendingRows parse_pending(std::string_view text, DbType type);

}  // namespace apus::container
