// Expiring objects: the X-Delete-At / X-Delete-After values an object server reads from
// requests and metadata, parsed the way Swift 2.30.1 reads them (Python's int() and float()),
// without exceptions and without overflowing arithmetic. Every value here comes from a client
// or a peer, so nothing throws and every number is bounded before use.
//
// Swift keeps a delete-at in 0..9999999999 (normalize_delete_at_timestamp: ten digits sort as
// strings in the expirer's queue), so values beyond int64 only need to keep their order: they
// saturate.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/http/headers.h"
#include "common/http/server.h"
#include "common/timestamp.h"
#include "object-server/diskfile.h"

namespace apus::object {

// Integers parse with common::parse_python_int_saturating() and bound with
// common::clamp_delete_at() (the proxy reads the same headers the same way).

// The X-Delete-At stored in `md`; 0 when absent or unreadable (such an object never expires,
// and no queue row can name it).
int64_t delete_at_of(const Metadata& md);

// What an object PUT asks of the expiring-objects queue.
struct DeleteAtRequest {
  std::optional<std::string> value;  // the X-Delete-At to store, when the request sets one
  int64_t delete_at = 0;             // its value (unclamped), 0 when none
};

// Swift's check_delete_headers() on an object PUT: the request's delete-at, or Swift's 400
// (text/plain, its message as the body). X-Delete-After (it wins over X-Delete-At) becomes an
// X-Delete-At of `now` + after, clamped, computed in doubles as Swift does (no overflow for any
// value); both must be integers and lie after `now`, except that X-Backend-Replication lets an
// X-Delete-At in the past through.
common::http::OrRefusal<DeleteAtRequest> check_delete_headers(
    const common::http::HeaderMap& headers, const common::Timestamp& now);

// X-Delete-At-Container as Swift reads it (float(), then bounded as a delete-at); nullopt when it
// is not a number.
std::optional<int64_t> parse_queue_container(std::string_view text);

}  // namespace apus::object
