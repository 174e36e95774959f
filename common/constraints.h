// Constraints: Swift's cluster-wide limits and the request checks built on them.
//
// A Constraints value holds the limits Swift publishes under "swift" in /info: the defaults of
// swift/common/constraints.py, optionally overridden by swift.conf [swift-constraints]. The
// check_* functions are pure: they look at request headers (and a name) and return a
// CheckResult carrying the HTTP status and the exact text/plain body Swift answers with, so
// clients and Swift's functional tests see the same errors. They never throw.
//
// Lengths are byte counts of the raw header or name bytes, which is what Swift measures on
// its WSGI (latin-1) strings.
//
// Thread-compatible: all values; the functions touch no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/headers.h"
#include "common/status.h"

namespace apus::common {

class Config;

struct Constraints {
  int64_t max_file_size = 5368709122;  // bytes: 5 GiB + 2
  int64_t max_meta_name_length = 128;  // bytes, after the X-<Type>-Meta- prefix
  int64_t max_meta_value_length = 256;
  int64_t max_meta_count = 90;
  int64_t max_meta_overall_size = 4096;  // sum of name (sans prefix) + value lengths
  int64_t max_header_size = 8192;        // any single header value
  int64_t max_object_name_length = 1024;
  int64_t container_listing_limit = 10000;
  int64_t account_listing_limit = 10000;
  int64_t max_account_name_length = 256;
  int64_t max_container_name_length = 256;
  std::vector<std::string> valid_api_versions = {"v1", "v1.0"};
  int64_t extra_header_count = 0;
  std::string auto_create_account_prefix = ".";  // deprecated option, still honoured

  // Swift's MAX_HEADER_COUNT: max_meta_count + 36 + max(extra_header_count, 0). The 36 leaves
  // room for Swift's own and ordinary HTTP headers.
  int64_t max_header_count() const;
  // How many response headers a backend HTTP client accepts: Swift sets http.client's limit
  // to MAX_HEADER_COUNT * 1.6 and fails only above it, so floor() of that product (201).
  int64_t backend_max_header_count() const;

  // The defaults with any [swift-constraints] options of `swift_conf` applied (integers as
  // integers, valid_api_versions as a comma list, auto_create_account_prefix as text). As in
  // Swift, [DEFAULT] values count only when the section exists. A non-integer value gives
  // InvalidArgument naming the file, section and key.
  static Result<Constraints> from_config(const Config& swift_conf);
};

// The outcome of a check: ok(), or the status and body Swift would answer with.
struct CheckResult {
  int status = 0;    // 0 when the check passed, else an HTTP status (400, 411, 412, 413, 501)
  std::string body;  // text/plain response body; empty when passed

  bool ok() const { return status == 0; }
  static CheckResult pass() { return {}; }
  static CheckResult fail(int http_status, std::string text) {
    return {http_status, std::move(text)};
  }
};

// Which metadata prefix check_metadata() looks at: X-Account-Meta-, X-Container-Meta- or
// X-Object-Meta-.
enum class MetadataTarget { kAccount, kContainer, kObject };

// Swift's check_metadata(): 400 when any header value exceeds max_header_size, or a
// X-<Type>-Meta-* header has an empty name, a name or value too long, the count or total size
// goes over the limits, or (account/container only) name or value is not valid UTF-8.
// Checks the request's headers only; servers re-check the stored totals themselves.
CheckResult check_metadata(const Constraints& c, const http::HeaderMap& headers,
                           MetadataTarget target);

// Swift's check_object_creation() minus X-Delete-At/After validation: Transfer-Encoding must
// be exactly "chunked" (else 400, or 501 for a list), Content-Length must be a number (400)
// and at most max_file_size (413), one of them must be present (411), the object name at most
// max_object_name_length bytes (400), Content-Type present and valid UTF-8 (400); then
// check_metadata(kObject). The proxy must also call check_content_type().
CheckResult check_object_creation(const Constraints& c, const http::HeaderMap& headers,
                                  std::string_view object_name);

// The proxy's object PUT check: 400 when a Content-Type parameter starts with "swift_" (those
// are reserved for Swift's own use, e.g. swift_bytes). Object servers must not apply it.
CheckResult check_content_type(const http::HeaderMap& headers);

// Swift's check_utf8(): true when `s` is non-empty, valid UTF-8 without surrogates or
// overlong forms, and contains no NUL byte (NUL is allowed when `internal`: reserved names).
bool check_utf8(std::string_view s, bool internal = false);

// The path check every server runs on the percent-decoded path: 412 "Invalid UTF8 or contains
// NULL" unless check_utf8(path, allow_reserved). `allow_reserved` comes from
// X-Backend-Allow-Reserved-Names.
CheckResult check_path_utf8(std::string_view path, bool allow_reserved = false);

// Whether `version` (the first path element, e.g. "v1") is one of c.valid_api_versions.
bool valid_api_version(const Constraints& c, std::string_view version);

}  // namespace apus::common
