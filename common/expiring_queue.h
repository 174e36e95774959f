// The expiring-objects queue: how an object with X-Delete-At is recorded for the expirer, in
// Swift 2.30's layout (swift-protocol.md §6.6), shared by the proxy (which names the queue
// container and its replicas), the object server (which adds and removes rows) and
// apus-object-expirer (which reads them).
//
// The queue is an account (`<auto_create_account_prefix>expiring_objects`) whose containers
// are named by time: the object's delete-at rounded down to `divisor` seconds (86400: one day),
// less a shard of 0..99 taken from the object's name hash so that one day's rows spread over
// 100 containers. Each row is named `<delete-at %010d>-<account>/<container>/<object>`, empty,
// with content type text/plain (or application/async-deleted for SLO's async segment
// deletes, which the expirer deletes without X-If-Delete-At).
//
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/timestamp.h"

namespace apus::common {

// Swift's default expiring_objects_container_divisor and account name (after the prefix).
inline constexpr int64_t kExpiringObjectsContainerDivisor = 86400;
inline constexpr std::string_view kExpiringObjectsAccountName = "expiring_objects";
// The content type of a row that asks for an unconditional delete (SLO's async delete).
inline constexpr std::string_view kAsyncDeleteType = "application/async-deleted";

// The shard of an object in its day: int(hash_hex, 16) % 100, where `path_hash_hex` is the
// object's hash_path in hex (32 characters; other characters count as 0).
int64_t expirer_shard(std::string_view path_hash_hex);

// Swift's get_expirer_container(): the queue container (as a number, before formatting) of an
// object deleted at `delete_at` (already clamped to 0..9999999999). REQUIRES: divisor > 0.
int64_t expirer_container_number(int64_t delete_at, int64_t divisor,
                                 std::string_view path_hash_hex);
// The same as the queue container's name: "%010d", clamped to 0..9999999999 as Swift's
// normalize_delete_at_timestamp() does (a shard below the first day gives "0000000000").
std::string expirer_container_name(int64_t delete_at, int64_t divisor,
                                   std::string_view path_hash_hex);

// Swift's build_task_obj(): "<delete_at %010d>-<account>/<container>/<object>".
std::string expirer_task_name(int64_t delete_at, std::string_view account,
                              std::string_view container, std::string_view object);

// A queue row read back (Swift's parse_task_obj()).
struct ExpirerTask {
  Timestamp delete_at;
  std::string account, container, object;
  // "<account>/<container>/<object>", the target the round-robin order groups by.
  std::string target_path() const { return account + "/" + container + "/" + object; }
};
// nullopt when `name` is not "<timestamp>-<a>/<c>/<o>" with a valid timestamp and non-empty
// a, c and o (the object may hold '/'), as Swift's parse raises ValueError.
std::optional<ExpirerTask> parse_expirer_task(std::string_view name);

// Swift's hash_mod(): int(md5(name).hexdigest(), 16) % divisor, which picks the one expirer
// process (of `processes`) that handles a row. REQUIRES: divisor > 0.
uint64_t expirer_hash_mod(std::string_view name, uint64_t divisor);

}  // namespace apus::common
