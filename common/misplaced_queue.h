// The container reconciler's queue: objects written in a storage policy other than their
// container's (after a split-brain container PUT, once replication settles the container's
// policy), in Swift 2.30's layout, so that either the queue's writer (the container replicator,
// container-server/db_replicator.cpp) or its reader (apus-container-reconciler,
// container-server/reconciler.h) may be Swift's.
//
// The queue is the account `.misplaced_objects`. Its containers are named by the hour of the
// misplaced row's newest timestamp (Unix seconds rounded down to 3600). A queue row is named
// "<policy index>:/<account>/<container>/<object>" (the policy the object was written in), its
// etag and created_at are the misplaced row's created_at (encoded timestamps), its size is 0 and
// its content type is application/x-put or application/x-delete (the write was a PUT or a
// DELETE).
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/timestamp.h"

namespace apus::common {

inline constexpr std::string_view kMisplacedObjectsAccount = ".misplaced_objects";
inline constexpr int64_t kMisplacedObjectsContainerDivisor = 3600;  // one hour
inline constexpr std::string_view kMisplacedPutType = "application/x-put";
inline constexpr std::string_view kMisplacedDeleteType = "application/x-delete";

// Swift's get_reconciler_container_name(): the queue container of a row whose newest timestamp
// is `t`.
std::string misplaced_container_name(const Timestamp& t);
// Swift's get_reconciler_obj_name().
std::string misplaced_entry_name(int64_t policy_index, std::string_view account,
                                 std::string_view container, std::string_view object);

// A queue row, read (Swift's parse_raw_obj()).
struct MisplacedEntry {
  int64_t policy_index = 0;  // where the object was written (q_policy_index)
  std::string account, container, object;
  bool is_delete = false;  // q_op: the write was a DELETE
  Timestamp timestamp;     // q_ts: the write's time (from the row's etag)
  Timestamp queued_at;     // q_record: when the row was queued (its last_modified)

  std::string path() const { return "/" + account + "/" + container + "/" + object; }
};

// The entry of a listing row: its name, content_type, hash (etag) and last_modified
// ("YYYY-MM-DDTHH:MM:SS.ffffff"). InvalidArgument, naming what is wrong, for a row that is not
// one: no "<int>:" prefix, a path without account, container and object, another content type,
// an etag or last_modified that is no timestamp.
Result<MisplacedEntry> parse_misplaced_entry(std::string_view name, std::string_view content_type,
                                             std::string_view hash,
                                             std::string_view last_modified);

// What decides which replica's storage policy index a container keeps (Swift's
// cmp_policy_info()): the index and the replica's timestamps, as the texts they are.
struct PolicyClaim {
  int64_t storage_policy_index = 0;
  std::string put_timestamp, delete_timestamp, status_changed_at;
  int64_t object_count = 0;
};
// Whether `other`'s index should win over `ours` (cmp_policy_info(ours, other) > 0): a deleted
// replica loses to a live one; of two recreated ones (put after a delete), the newer
// recreation wins; otherwise the oldest status wins. Deletion and recreation compare as
// Timestamps, the rest as the strings Swift compares.
bool policy_claim_wins(const PolicyClaim& ours, const PolicyClaim& other);

// A listing's last_modified ("YYYY-MM-DDTHH:MM:SS.ffffff", UTC) as a Timestamp (Swift's
// last_modified_date_to_timestamp()). InvalidArgument when it is not one.
Result<Timestamp> parse_last_modified(std::string_view text);

}  // namespace apus::common
