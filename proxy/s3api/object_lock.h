// S3 Object Lock: a bucket made with x-amz-bucket-object-lock-enabled keeps every version
// (versioning on, and it cannot be suspended); a version under retention (GOVERNANCE or
// COMPLIANCE, until a date) or a legal hold cannot be deleted by its version id, and its
// retention can only be made longer (GOVERNANCE: shorter or another mode too with
// x-amz-bypass-governance-retention). Swift's s3api has none of it; this is Apus's own.
//
// Kept in Swift metadata:
// - the bucket's configuration in X-Container-Sysmeta-S3api-Object-Lock ({} when enabled
//   without a default rule, {"Mode":"GOVERNANCE","Days":1} with one);
// - a version's retention and legal hold in transient sysmeta (the metadata a POST may
//   change): X-Object-Transient-Sysmeta-S3api-Lock-Mode, -Lock-Until (as the client wrote the
//   date), -Legal-Hold (ON or OFF).
// The lock holds on the S3 API. A Swift API user with write access to the account can still
// delete a version through Swift, which knows nothing of it.
//
// The model is pure (thread-safe); object_lock.cpp also serves the operations (s3_request.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/http/headers.h"
#include "proxy/s3api/s3_auth.h"

namespace apus::proxy::s3api {

inline constexpr std::string_view kObjectLockSysmeta = "X-Container-Sysmeta-S3api-Object-Lock";
inline constexpr std::string_view kLockModeSysmeta = "X-Object-Transient-Sysmeta-S3api-Lock-Mode";
inline constexpr std::string_view kLockUntilSysmeta = "X-Object-Transient-Sysmeta-S3api-Lock-Until";
inline constexpr std::string_view kLegalHoldSysmeta = "X-Object-Transient-Sysmeta-S3api-Legal-Hold";

// A bucket's ObjectLockConfiguration: its default retention, if any (days or years).
struct LockConfiguration {
  std::string mode;  // "" (no default rule), "GOVERNANCE" or "COMPLIANCE"
  int64_t days = 0;
  int64_t years = 0;
  bool operator==(const LockConfiguration&) const = default;
};
// The document a client PUTs: MalformedXML unless ObjectLockEnabled is Enabled and a rule has
// a known mode and exactly one of Days and Years; InvalidRetentionPeriod for one that is not
// positive (or over 100 years).
std::variant<LockConfiguration, S3Error> parse_lock_configuration(std::string_view xml);
std::string lock_configuration_document(const LockConfiguration& c);
std::string encode_lock_configuration(const LockConfiguration& c);
std::optional<LockConfiguration> decode_lock_configuration(std::string_view stored);

// A version's retention.
struct Retention {
  std::string mode;   // GOVERNANCE or COMPLIANCE
  std::string until;  // the date as written (ISO 8601)
  double until_seconds = 0;
};
// An ISO 8601 date and time ("2030-01-01T00:00:00Z", fractions and "+00:00" taken) as seconds
// since the epoch; nullopt when it is not one.
std::optional<double> parse_iso8601(std::string_view text);
// The Retention document a client PUTs (MalformedXML when it is not one; InvalidArgument for a
// date that is not in the future, `now` seconds since the epoch).
std::variant<Retention, S3Error> parse_retention(std::string_view xml, double now);
std::string retention_document(const Retention& r);
// The LegalHold document (Status ON or OFF; MalformedXML otherwise): whether it is on.
std::variant<bool, S3Error> parse_legal_hold(std::string_view xml);
std::string legal_hold_document(bool on);

// What protects a version, from its HEAD or GET answer.
struct LockState {
  std::optional<Retention> retention;
  bool legal_hold = false;
};
LockState lock_state(const common::http::HeaderMap& swift);

// Whether the version may not be deleted now: a legal hold, or a retention not yet over
// (a GOVERNANCE one gives way to `bypass_governance`).
bool deletion_refused(const LockState& s, double now, bool bypass_governance);
// Whether `next` may replace the version's retention: COMPLIANCE only by a COMPLIANCE one as
// long or longer; GOVERNANCE by a GOVERNANCE one as long or longer, or anything with
// `bypass_governance`. A retention that is over may be replaced by any.
bool retention_change_allowed(const LockState& s, const Retention& next, double now,
                              bool bypass_governance);

// The x-amz-object-lock-* headers of an object's HEAD or GET answer, from its metadata.
void add_lock_headers(const common::http::HeaderMap& swift, common::http::HeaderMap& s3);

// What an object write stores (name, value) for the lock: x-amz-object-lock-mode with
// -retain-until-date (both or neither: InvalidArgument), -legal-hold; else the bucket's
// default retention from `now`. `bucket` is the bucket's configuration (nullopt: the bucket
// has no Object Lock, and asking for it is InvalidRequest).
std::variant<std::vector<std::pair<std::string, std::string>>, S3Error> lock_for_write(
    const common::http::HeaderMap& client, const std::optional<LockConfiguration>& bucket,
    double now);

}  // namespace apus::proxy::s3api
