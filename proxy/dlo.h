// dlo: Swift's dynamic large objects. An object stored with `X-Object-Manifest:
// <container>/<prefix>` is answered, on GET and HEAD, as the concatenation of the objects whose
// names start with <prefix> in <container> (same account), in name order: the middleware lists
// the container through subrequests (pages of container_listing_limit names), announces the
// Etag of the concatenated segment etags and the summed Content-Length when the listing fits one
// page, and streams the segments one after the other with the next one's GET started before the
// current one ends. `?multipart-manifest=get` reads the manifest object itself. A PUT carrying
// X-Object-Manifest has its value checked (400). Swift's options: max_get_time,
// rate_limit_after_segment, rate_limit_segments_per_sec. Swift's dlo adds nothing to /info.
//
// The pure parts (header checks, listing parsing, etag, range arithmetic, segment rate limit)
// are declared here for the unit tests.
//
// Thread-compatible per request; the middleware object keeps only its options.
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

// The dlo filter built from its [filter:dlo] section (or [DEFAULT] when Swift's pipeline
// insertion added it). InvalidArgument for an option that is not an integer.
common::Result<std::unique_ptr<Middleware>> make_dlo(const common::Section& section,
                                                     const MiddlewareContext& context);

namespace dlo {

// The [filter:dlo] options, with Swift's names and defaults.
struct Options {
  int64_t max_get_time = 86400;             // seconds a GET may stream segments
  int64_t rate_limit_after_segment = 10;    // segments fetched before the rate limit applies
  int64_t rate_limit_segments_per_sec = 1;  // then at most this many a second (0: no limit)
};
// Read from the filter's `section`; when it sets none of them and the proxy app's section `app`
// is given, from that (Swift reads DLO's old location in [app:proxy-server]).
common::Result<Options> parse_options(const common::Section& section,
                                      const common::Section* app = nullptr);

// The 400 Swift answers a PUT whose X-Object-Manifest is not "<container>/<prefix>" (either
// part empty, a '?' or '&' anywhere, a prefix starting with '/'); nullopt when the request has
// no such header or it is good. The value is checked as sent, before any percent-decoding.
std::optional<common::http::Response> check_manifest_header(const common::http::HeaderMap& h);

// "<container>/<prefix>" (already percent-decoded) split at its first '/'; nullopt without one.
std::optional<std::pair<std::string, std::string>> split_manifest(std::string_view value);

// One object of a container listing page.
struct Segment {
  std::string name;
  uint64_t bytes = 0;
  std::string hash;
};

// A container's JSON listing ([{"name":..,"bytes":..,"hash":..}, ...]); subdir entries are
// skipped. Corruption when the text is not such a listing.
common::Result<std::vector<Segment>> parse_listing(std::string_view json);

// Swift's DLO etag: the quoted md5 hex of the segments' etags (quotes removed) concatenated.
std::string etag_of(const std::vector<Segment>& segments);

// Which bytes of each segment a GET needs, in listing order (Swift's segment listing walk):
// built from the first and last byte of the whole object wanted (nullopt: from the start, to
// the end), it is asked about each segment in turn.
class SegmentCursor {
 public:
  SegmentCursor(std::optional<uint64_t> first, std::optional<uint64_t> last);

  // The part of a segment of `length` bytes to fetch: `first`/`last` unset mean from its start
  // and to its end.
  struct Piece {
    std::optional<uint64_t> first;
    std::optional<uint64_t> last;
    // The bytes the piece holds, for a segment of `length` bytes.
    uint64_t size(uint64_t length) const;
    // The Range header value to ask for it ("bytes=5-", "bytes=0-9"), or "" for all of it.
    std::string range_header() const;
  };
  enum class Step { kSkip, kFetch, kDone };

  // What to do with the next segment, of `length` bytes: skip it, fetch `*piece` of it, or
  // stop (nothing more is wanted from it or any later segment).
  Step next(uint64_t length, Piece* piece);
  // True once no later segment is wanted.
  bool done() const { return !to_end_ && last_ < 0; }

 private:
  int64_t first_;  // may reach -1: "from the start" for every later segment
  int64_t last_;   // meaningful only when !to_end_
  bool to_end_;
};

}  // namespace dlo
}  // namespace apus::proxy
