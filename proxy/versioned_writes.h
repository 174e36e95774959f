// versioned_writes: Swift's versioning filter (egg:swift#versioned_writes), which holds two
// middlewares as Swift's filter factory composes them:
// - object_versioning (allow_object_versioning = true): X-Versions-Enabled on containers; each
//   object PUT stores the data as a version in the hidden container "\x00versions\x00<c>" under
//   "\x00<object>\x00<inverted timestamp>" and makes the object itself a static symlink to it
//   (sysmeta Versions-Symlink); DELETE writes a delete marker version; ?versions lists every
//   version; ?version-id= reads, deletes or restores (PUT) one version; "null" names the
//   unversioned object. The layout is Swift's byte for byte, so a Swift proxy, Swift's s3api
//   and Apus read each other's versions.
// - the legacy versioned writes (allow_versioned_writes = true): X-Versions-Location (stack
//   mode: DELETE restores the previous version) and X-History-Location (history mode: DELETE
//   copies the object away and writes a marker), versions named "<len:%03x><object>/<ts>".
// The legacy middleware is the outer one, object versioning inside it, as Swift stacks them.
// Object versioning needs the symlink middleware in the pipeline (Swift refuses to start
// without it; so does the proxy here).
//
// The functions in namespace `versioning` are the pure parts (names, version ids, listing
// rewrites), exposed for tests.
//
// Pure functions: thread-safe. The middlewares keep only their config (thread-safe).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The versioned_writes filter from its [filter:...] section: allow_versioned_writes and
// allow_object_versioning (both default false; with neither it still honours a container's
// plain X-Versions-Location metadata, as Swift's does).
common::Result<std::unique_ptr<Middleware>> make_versioned_writes(
    const common::Section& section, const MiddlewareContext& context);

namespace versioning {

inline constexpr char kReserved = '\0';
inline constexpr std::string_view kDeleteMarkerType =
    "application/x-deleted;swift_versions_deleted=1";
// Client-facing and stored headers of object versioning.
inline constexpr std::string_view kClientEnabled = "X-Versions-Enabled";
inline constexpr std::string_view kSysEnabled = "X-Container-Sysmeta-Versions-Enabled";
inline constexpr std::string_view kSysContainer = "X-Container-Sysmeta-Versions-Container";
inline constexpr std::string_view kSysParent = "X-Container-Sysmeta-Parent-Container";
inline constexpr std::string_view kSysSymlink = "X-Object-Sysmeta-Versions-Symlink";
// On a listing answer: formatted by the middleware itself (swift.format_listing false), so
// listing_formats passes it on as it is, without this header.
inline constexpr std::string_view kFormattedListing = "X-Backend-Listing-Formatted";
// Legacy mode.
inline constexpr std::string_view kClientVersionsLoc = "X-Versions-Location";
inline constexpr std::string_view kClientHistoryLoc = "X-History-Location";
inline constexpr std::string_view kSysVersionsLoc = "X-Container-Sysmeta-Versions-Location";
inline constexpr std::string_view kSysVersionsMode = "X-Container-Sysmeta-Versions-Mode";

// Swift's get_reserved_name(): "\x00" + parts joined by "\x00"; nullopt when a part holds the
// reserved byte.
std::optional<std::string> reserved_name(std::initializer_list<std::string_view> parts);
// Swift's split_reserved_name(): the parts after the leading "\x00"; nullopt when `name` does
// not start with it.
std::optional<std::vector<std::string>> split_reserved_name(std::string_view name);

// "\x00versions\x00<container>" (nullopt when the container name holds "\x00").
std::optional<std::string> versions_container_name(std::string_view container);
// The user container of a versions container name; `name` itself when it is not one.
std::string split_versions_container_name(std::string_view name);
// "\x00<object>\x00" + (~Timestamp(version_id)).internal: InvalidArgument when version_id is
// no timestamp, has an offset, or the object name holds "\x00".
common::Result<std::string> versions_object_name(std::string_view object,
                                                 std::string_view version_id);
// The user object and version id of a version object name; the name and nullopt when it is
// not one.
std::pair<std::string, std::optional<std::string>> parse_versions_object_name(
    std::string_view name);
// A timestamp's version id: its internal form with the offset dropped. InvalidArgument when
// it is no timestamp.
common::Result<std::string> timestamp_to_version(std::string_view timestamp);
// Whether `version` is a usable version-id parameter ("null" only when allow_null).
bool valid_version(std::string_view version, bool allow_null);

// The `marker` of the versions container listing for a ?versions listing's marker and
// version_marker parameters (nullopt: absent). A failed Result is the 400 body.
common::Result<std::optional<std::string>> versions_listing_marker(
    const std::optional<std::string>& marker, const std::optional<std::string>& version_marker);

// Swift's ContainerContext rewrite of a versioned container's JSON listing `json`: entries that
// are links into `location` (the versions container) get the version's bytes and etag and
// "version_symlink": true, and, unless `versions_listing`, a symlink_path of
// "/v1/<account>/<container>/<object>?version-id=<id>". nullopt when `json` is not a JSON
// array (the listing then goes out as it came).
std::optional<std::string> rewrite_container_listing(std::string_view json,
                                                     std::string_view location,
                                                     std::string_view container,
                                                     bool versions_listing);

// Swift's _list_versions() merge: the rewritten primary listing (`primary`, JSON) with the
// versions container's listing (`versions`, JSON; nullopt when that container answered 404)
// of `location` in `account`, sorted by name (reversed with `reverse`), at most `limit`
// entries. nullopt when either is not a JSON array of objects.
std::optional<std::string> merge_versions_listing(std::string_view primary,
                                                  const std::optional<std::string>& versions,
                                                  std::string_view account,
                                                  std::string_view location, bool reverse,
                                                  int64_t limit);

// Swift's AccountContext merge: an account listing (`listing`, JSON) with the listing of its
// versions containers (`versions`, JSON): each container's bytes grow by its versions
// container's, and versions containers without a container are listed under the user name with
// count 0. nullopt when `listing` is not a JSON array of objects.
std::optional<std::string> merge_account_listing(std::string_view listing,
                                                 std::string_view versions, bool reverse,
                                                 int64_t limit);

// Legacy mode: "<len(object) as %03x><object>/" and that plus the timestamp's internal form.
std::string legacy_versions_prefix(std::string_view object);
common::Result<std::string> legacy_versions_name(std::string_view object,
                                                 std::string_view timestamp);

}  // namespace versioning

// The two halves of the filter (object_versioning.cpp, versioned_writes.cpp).
// `allow_versioned_writes` is the option's raw text, which Swift's legacy middleware tests for
// presence as well as truth.
std::unique_ptr<Middleware> make_object_versioning(const MiddlewareContext& context);
std::unique_ptr<Middleware> make_legacy_versioned_writes(const MiddlewareContext& context,
                                                         std::string allow_versioned_writes);

}  // namespace apus::proxy
