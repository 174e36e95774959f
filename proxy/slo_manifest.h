// Static large object manifests, the pure part of the slo middleware (proxy/slo.cpp): what a
// client may PUT with ?multipart-manifest=put and the refusals Swift 2.30 gives for the rest,
// the manifest Swift stores (a JSON list of {name, bytes, hash, content_type, last_modified[,
// range][, sub_slo]} and {data} entries), the large object's etag and size, the mapping of a
// byte range of the large object onto its segments, and the answer bodies Swift's bulk
// middleware writes (which SLO reuses for its PUT and DELETE answers).
//
// Parsing is Boost.JSON; the rules, error texts and numbers are Swift's
// (swift-protocol.md, swift/common/middleware/slo.py). Nothing here does I/O.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/crypto/base64.h"
#include "common/http/range.h"
#include "common/http/server.h"

namespace apus::proxy::slo {

inline constexpr int64_t kDefaultMaxManifestSegments = 1000;
inline constexpr int64_t kDefaultMaxManifestSize = 8 * 1024 * 1024;
inline constexpr int64_t kDefaultYieldFrequency = 10;
inline constexpr int64_t kDefaultRateLimitUnderSize = 1024 * 1024;
inline constexpr int kMaxRecursionDepth = 10;  // nesting of sub-SLOs a GET follows

// One entry of a client's manifest, validated.
struct InputSegment {
  bool is_data = false;
  // Object-backed ("path"): the path as the client wrote it, its optional etag (nullopt for an
  // absent or null etag) and size_bytes, and its single range spec, when one was given.
  std::string path;
  std::optional<std::string> etag;
  std::optional<int64_t> size_bytes;
  std::optional<common::http::RangeSpec> range;
  // Inline ("data"): the decoded bytes (never empty).
  std::string data;
};

// Swift's parse_and_validate_input(): the segments of a manifest PUT body for the object at
// `object_path` (decoded, "/v1/<account>/<container>/<object>"), or Swift's refusal: 400
// "Manifest must be valid JSON.\n" / "Manifest must be a list.\n" (swob's HTML content type),
// 400 text/plain with one "Index N: ..." line per bad entry (and the inline-data-only line), or
// 500 "An error occurred" where Swift 2.30's own code fails (an entry with neither key, or a
// non-object entry where every entry before it was inline data).
common::http::OrRefusal<std::vector<InputSegment>> parse_manifest_input(
    std::string_view body, std::string_view object_path);

// One entry of a stored manifest.
struct StoredSegment {
  bool is_data = false;
  std::string name;          // "/container/object"
  int64_t bytes = 0;         // the segment object's length (a sub-SLO's whole length)
  std::string hash;          // its etag
  std::string content_type;
  std::string last_modified;  // "%Y-%m-%dT%H:%M:%S.%f"
  std::optional<std::pair<int64_t, int64_t>> range;  // first and last byte, inclusive
  bool sub_slo = false;
  std::string data;  // inline: the decoded bytes
  // The bytes of the segment the large object includes: the range's, the object's or the data's.
  int64_t length() const;
};

// json.dumps() of a manifest as Swift stores it: the keys in Swift's order, ", " and ": ", non
// ASCII as \uXXXX; data entries as {"data": <base64>}.
std::string to_stored_json(const std::vector<StoredSegment>& segments);
// A stored manifest read back (Swift's own or ours). A sub-SLO entry whose content type carries
// swift_bytes takes its bytes from there, as Swift does for old manifests. InvalidArgument for
// anything that is not such a list.
common::Result<std::vector<StoredSegment>> parse_stored(std::string_view json);
// The manifest as a client wrote it (?multipart-manifest=get&format=raw): json.dumps(...,
// sort_keys=True) of {path, etag, size_bytes[, range]} and {data} entries.
std::string to_raw_json(const std::vector<StoredSegment>& segments);

// The large object's etag as Swift 2.30 computes it (hex, no quotes): md5 over, for each
// segment, its hash, or "<hash>:<range>;" for a ranged one, or the md5 hex of inline data.
std::string slo_etag(const std::vector<StoredSegment>& segments);
// The large object's length: the sum of the segment lengths.
int64_t total_length(const std::vector<StoredSegment>& segments);

// A part of one segment that a byte range of the large object covers.
struct Piece {
  size_t index = 0;  // the segment
  // Inclusive offsets in the segment object's own bytes (its range applied), the inline data's,
  // or, for a sub-SLO, the sub-SLO's large object.
  int64_t first = 0;
  int64_t last = 0;
};

// The pieces, in order, that bytes [first, last] of the large object made of `segments` come
// from (Swift's _byterange_listing_iterator, one level: sub-SLO pieces are expanded by the
// caller with that sub-SLO's segments).
std::vector<Piece> pieces_for_range(const std::vector<StoredSegment>& segments, int64_t first,
                                    int64_t last);

// Base64 (common/crypto/base64.h), by the names SLO's code and tests use.
using common::crypto::b64encode;
using common::crypto::strict_b64decode;

// One field of a bulk answer: its key and value (a number is written bare in JSON).
struct BulkField {
  std::string key;
  std::string value;
  bool number = false;
};
// One failed object of a bulk answer: its quoted name and a status or reason.
struct BulkError {
  std::string name;
  std::string status;
};
// Swift's bulk get_response_body(): JSON ({fields..., "Errors": [[name, status]...]}), XML
// (<root_tag> with the fields sorted, then <errors>) for a content type ending in /xml, else
// the plain "Key: value" lines sorted and "Errors:" with "name, status" lines.
std::string bulk_response_body(std::string_view content_type, std::vector<BulkField> fields,
                               const std::vector<BulkError>& errors, std::string_view root_tag);

}  // namespace apus::proxy::slo
