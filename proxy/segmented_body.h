// The body of a large object (SLO or DLO), streamed from its segment objects: Swift's
// SegmentedIterable, shared by both middlewares.
//
// A PieceSource says which bytes come next: inline bytes (an SLO data segment), or a byte range
// of a segment object. SegmentedBody fetches each segment with a GET subrequest
// (?multipart-manifest=get, so a segment is never expanded itself) and hands the bytes over
// chunk by chunk:
// - The next segment's GET starts once less than a read-ahead's worth of the current one is
//   still to arrive, each GET with that read-ahead, so at most two segments' buffers are in
//   flight and no round trip stalls the stream.
// - Every segment is checked: its status, its length against what the source expects, its etag
//   against the one the manifest recorded (if any), and, when read whole, the md5 of its bytes
//   against its Etag. The last chunk of a segment is held back until those checks pass, so a
//   segment that changed or vanished mid-GET ends the body short (logged), and a wrong segment
//   is never delivered whole.
// - Segments the source marks rate-limited are fetched at most rate_limit_segments_per_sec a
//   second once rate_limit_after_segment of them went (Swift's RateLimitedIterator), and no
//   segment GET starts once the body has streamed for max_get_time seconds (the body fails
//   there, as Swift's does).
//
// Failures are Unavailable (a segment answered 5xx: Swift's 503 before the first byte),
// Timeout (max_get_time), or Conflict (anything else: Swift's SegmentError and ListingIterError,
// a 409 before the first byte). The messages start "While processing manifest <name>, ...".
//
// Thread-compatible: one request's coroutine uses it; close() must be awaited before it goes.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

class Subrequest;

// One piece of a large object's body.
struct BodyPiece {
  bool is_data = false;
  std::string data;          // is_data: the bytes themselves
  std::string path;          // else: the segment object, decoded "/v1/a/c/o"
  std::string range;         // the Range header to fetch it with; "" for the whole object
  uint64_t expected = 0;     // the bytes the piece holds
  std::string etag;          // the segment's etag as the manifest recorded it; "" unchecked
  bool rate_limited = true;  // counts towards the segment rate limit
};

class PieceSource {
 public:
  virtual ~PieceSource() = default;
  // The next piece; nullopt at the end; a failure as SegmentedBody's (Conflict, Unavailable).
  virtual boost::asio::awaitable<common::Result<std::optional<BodyPiece>>> next() = 0;
};

struct SegmentedOptions {
  std::string name;    // the manifest's path, for messages
  std::string agent;   // User-Agent suffix of the segment GETs ("SLO", "DLO MultipartGET")
  std::string source;  // their swift.source ("SLO", "DLO")
  int64_t rate_limit_after_segment = 10;
  int64_t rate_limit_segments_per_sec = 1;  // 0: no limit
  int64_t max_get_time = 86400;             // seconds
};

// Swift's RateLimitedIterator over segments: the first `after` segments go at once, then at
// most `per_second` a second, with a burst allowance of 5 seconds' worth after a pause.
class SegmentRateLimiter {
 public:
  SegmentRateLimiter(int64_t after, int64_t per_second) : after_(after), rate_(per_second) {}
  // Seconds to wait before fetching the next segment, when it is fetched at `now` (seconds).
  double wait_before_next(double now);

 private:
  int64_t after_;
  int64_t rate_;
  double running_ms_ = 0;  // when the next segment may go, in milliseconds
};

class SegmentedBody {
 public:
  // `app`, `env`, `client` (whose headers the segment GETs carry over) and `source` must outlive
  // this.
  SegmentedBody(const Next& app, const ProxyEnv& env, const common::http::Request& client,
                SegmentedOptions options, PieceSource& source,
                const boost::asio::any_io_executor& executor);
  ~SegmentedBody();
  SegmentedBody(const SegmentedBody&) = delete;
  SegmentedBody& operator=(const SegmentedBody&) = delete;

  // The next bytes of the body, valid until the next call; empty at the end of what the source
  // gives.
  boost::asio::awaitable<common::Result<std::string_view>> next_chunk();

  // The source has more after saying it had ended (SLO's next byte range): go on with it.
  // REQUIRES: next_chunk() gave the end.
  void resume();

  // Ends every subrequest this body started.
  boost::asio::awaitable<void> close();

 private:
  struct Open;
  using Opened = common::Result<std::optional<Open>>;

  common::Status fail(std::string why) const;
  void maybe_prefetch();
  boost::asio::awaitable<void> wait_prefetch();
  boost::asio::awaitable<Opened> take_next();
  boost::asio::awaitable<Opened> open_next();
  boost::asio::awaitable<Opened> start_segment(BodyPiece piece);
  boost::asio::awaitable<common::Result<std::string_view>> finish_segment();

  const Next& app_;
  const ProxyEnv& env_;
  const common::http::Request& client_;
  SegmentedOptions options_;
  PieceSource& source_;
  SegmentRateLimiter limiter_;
  std::chrono::steady_clock::time_point started_;
  bool no_more_ = false;  // the source said it had ended
  std::unique_ptr<Open> cur_;
  // The next segment, opened in the background (prefetching_ while under way).
  bool prefetching_ = false;
  std::unique_ptr<Opened> prefetched_;
  boost::asio::steady_timer wake_;  // waited on by wait_prefetch() only
  // Two chunk buffers: one holds the chunk held back, the other is read into.
  std::array<std::string, 2> bufs_;
  bool held_ = false;
  size_t held_idx_ = 0, held_size_ = 0;
};

}  // namespace apus::proxy
