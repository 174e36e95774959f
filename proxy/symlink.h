// symlink: Swift's symlink middleware (egg:swift#symlink). A symlink is a zero-byte object
// whose sysmeta names another object; GET and HEAD follow it (up to symloop_max links), a
// static link (X-Symlink-Target-Etag) also checks the target's ETag, ?symlink=get reads the
// link itself, POST to a link answers 307, and container listings carry symlink_path (and
// symlink_etag, symlink_bytes) taken from the container-update override ETag the link PUT sets.
// Everything stored is spelt as Swift spells it, so Swift's proxy and Apus's read each other's
// links and listings.
//
// The functions in namespace `symlink` are the pure parts (header checks, the override ETag,
// listing rewrite), exposed for tests. The middleware is built by make_symlink().
//
// Pure functions: thread-safe. The middleware keeps only its config (thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "common/http/server.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

// The symlink middleware from its [filter:...] section: symloop_max (default 2; below 1 means
// 2). InvalidArgument when symloop_max is not an integer.
common::Result<std::unique_ptr<Middleware>> make_symlink(const common::Section& section,
                                                         const MiddlewareContext& context);

namespace symlink {

inline constexpr int kDefaultSymloopMax = 2;
inline constexpr std::string_view kEmptyEtag = "d41d8cd98f00b204e9800998ecf8427e";

// Client-facing headers.
inline constexpr std::string_view kTarget = "X-Symlink-Target";
inline constexpr std::string_view kTargetAccount = "X-Symlink-Target-Account";
inline constexpr std::string_view kTargetEtag = "X-Symlink-Target-Etag";
inline constexpr std::string_view kTargetBytes = "X-Symlink-Target-Bytes";
// What the object servers store.
inline constexpr std::string_view kSysTarget = "X-Object-Sysmeta-Symlink-Target";
inline constexpr std::string_view kSysTargetAccount = "X-Object-Sysmeta-Symlink-Target-Account";
inline constexpr std::string_view kSysTargetEtag = "X-Object-Sysmeta-Symlink-Target-Etag";
inline constexpr std::string_view kSysTargetBytes = "X-Object-Sysmeta-Symlink-Target-Bytes";
inline constexpr std::string_view kSysSymloopExtend = "X-Object-Sysmeta-Symloop-Extend";
inline constexpr std::string_view kSysAllowReserved = "X-Object-Sysmeta-Allow-Reserved-Names";
inline constexpr std::string_view kOverrideEtag = "X-Object-Sysmeta-Container-Update-Override-Etag";

// Swift's normalize_etag(): the value without one pair of surrounding double quotes.
std::string_view normalize_etag(std::string_view etag);

// Python's repr() of a str, as Swift's 409 bodies show ETags ('abc', "it's").
std::string python_repr(std::string_view s);

// What a symlink PUT asks for, once its headers are checked.
struct PutTarget {
  std::string path;  // "/v1/<account>/<container>/<object>", not quoted (as Swift builds it)
  std::string etag;  // the normalized X-Symlink-Target-Etag; empty for a dynamic link
};

// Swift's _validate_and_prep_request_headers() for a PUT to the object `account`/`container`/
// `object` (decoded) carrying X-Symlink-Target: the target must be "<container>/<object>"
// (412 otherwise), X-Symlink-Target-Account a usable name (412), the link must not name itself
// (400) and the ETag must not hold ';', '"' or '\' (400), with Swift's bodies. On success
// `headers` is rewritten as Swift rewrites it: the target (and account) re-quoted, and
// Content-Type application/symlink for a dynamic link without one.
common::http::OrRefusal<PutTarget> prepare_put(common::http::HeaderMap& headers,
                                               std::string_view account, std::string_view container,
                                               std::string_view object);

// The last step of a symlink PUT's headers: X-Symlink-Target and -Account become their sysmeta,
// and the container-update override ETag is set to the one Swift's listings read:
// "<existing override or md5 of nothing>; symlink_target=<t>[; symlink_target_account=<a>]
// [; symlink_target_etag=<e>; symlink_target_bytes=<n>]". REQUIRES: prepare_put() succeeded.
void finish_put_headers(common::http::HeaderMap& headers);

// Python's cgi.parse_header(): the main value and the parameters (names lower-cased, quoted
// values unquoted), in order; a repeated name keeps its first place and its last value, and a
// part without '=' is dropped.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> parse_header(
    std::string_view line);

// Python's posixpath.join(): a part starting with '/' restarts the path.
std::string path_join(std::initializer_list<std::string_view> parts);

// Swift's listing rewrite for the JSON container listing `json` of /<version>/<account>/...
// (`account` as it appears in the quoted request path): each object's hash loses its
// symlink_target* parameters, which become symlink_path, symlink_etag and symlink_bytes;
// written back as Python's json.dumps() writes it. nullopt when the body is not a JSON array
// of objects, or symlink_target_bytes is not an integer (Swift fails such a listing: 500).
std::optional<std::string> rewrite_listing(std::string_view json, std::string_view version,
                                           std::string_view account);

// One step of following links: what an answer to a GET or HEAD of a link (or its target) says.
struct Step {
  enum Kind {
    kFinal,          // not a link to follow: the answer goes to the client
    kFollow,         // a link: follow it to `next_path`
    kEtagsDiffer,    // a static link's ETag differs from the link's before it: 409
    kTooMany,        // more than symloop_max links: 409
    kTargetChanged,  // the final object's ETag is not the static link's: 409 (`body`)
  };
  Kind kind = kFinal;
  std::string next_path;        // kFollow: the quoted path of the target
  std::string next_etag;        // kFollow: the link's target ETag (empty for a dynamic link)
  bool counts = true;           // kFollow: counts towards symloop_max (no Symloop-Extend)
  bool allow_reserved = false;  // kFollow: the link may point at reserved names
  std::string body;             // kTargetChanged: Swift's body
};

// What Swift's _recursive_get_head() does with an answer carrying `headers` to a request for
// /<version>/<account>/... (`account` decoded): `follow_softlinks` false follows static links
// only (a PUT's check); `target_etag` is the ETag the previous static link expects (empty:
// none); `followed` is how many counted links were followed so far.
Step classify(const common::http::HeaderMap& headers, std::string_view version,
              std::string_view account, bool follow_softlinks, std::string_view target_etag,
              int followed, int symloop_max);

}  // namespace symlink
}  // namespace apus::proxy
