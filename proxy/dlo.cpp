// dlo (dlo.h): a GET or HEAD goes on down the pipeline as it came (with
// X-Backend-Ignore-Range-If-Metadata-Present naming X-Object-Manifest, so the object server
// ignores a Range for a manifest); an answer without X-Object-Manifest passes through untouched.
// An answer with it, whatever its status (the object server's 304/412/416 carry the manifest's
// headers too), is dropped and replaced by the large object's: a listing subrequest, then the
// segments as GET subrequests with ?multipart-manifest=get.
//
// Streaming: one segment is read while the next one's GET is already under way (started once
// less than kReadAhead bytes of the current one are still to come), each with kReadAhead bytes
// of read-ahead, so at most two segments' buffers are in flight. The last chunk read of a
// segment is held back until the segment is known good (its length, and its md5 when read
// whole), so a segment that changed or vanished mid-GET ends the body short, logged, and never
// lets wrong bytes through.
#include "proxy/dlo.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

#include "common/async.h"
#include "common/crypto/md5.h"
#include "common/http/date.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using common::http::iequals;

namespace dlo {

// ---- the pure parts ------------------------------------------------------------------------

Result<Options> parse_options(const common::Section& section) {
  Options o;
  APUS_ASSIGN_OR_RETURN(o.max_get_time, section.get_int("max_get_time", 86400));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_after_segment,
                        section.get_int("rate_limit_after_segment", 10));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_segments_per_sec,
                        section.get_int("rate_limit_segments_per_sec", 1));
  return o;
}

std::optional<Response> check_manifest_header(const HeaderMap& h) {
  auto value = h.get("X-Object-Manifest");
  if (!value) return std::nullopt;
  size_t slash = value->find('/');
  std::string_view container = value->substr(0, slash);
  std::string_view prefix =
      slash == std::string_view::npos ? std::string_view() : value->substr(slash + 1);
  if (container.empty() || prefix.empty() || value->find_first_of("?&") != std::string_view::npos ||
      prefix.front() == '/') {
    return common::http::swob_response_with_body(
        400, "X-Object-Manifest must be in the format container/prefix");
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> split_manifest(std::string_view value) {
  size_t slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  return std::make_pair(std::string(value.substr(0, slash)), std::string(value.substr(slash + 1)));
}

Result<std::vector<Segment>> parse_listing(std::string_view json) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_array()) return Status::corruption("container listing is not a JSON array");
  std::vector<Segment> out;
  out.reserve(v.as_array().size());
  for (const auto& e : v.as_array()) {
    const auto* o = e.if_object();
    if (!o) return Status::corruption("container listing entry is not an object");
    if (o->contains("subdir")) continue;
    const auto* name = o->if_contains("name");
    const auto* bytes = o->if_contains("bytes");
    const auto* hash = o->if_contains("hash");
    if (!name || !name->is_string() || !bytes || !hash || !hash->is_string()) {
      return Status::corruption("container listing entry lacks name, bytes or hash");
    }
    Segment s;
    s.name = std::string(name->as_string());
    if (bytes->is_uint64()) {
      s.bytes = bytes->as_uint64();
    } else if (bytes->is_int64() && bytes->as_int64() >= 0) {
      s.bytes = static_cast<uint64_t>(bytes->as_int64());
    } else {
      return Status::corruption("container listing entry has bad bytes");
    }
    s.hash = std::string(hash->as_string());
    out.push_back(std::move(s));
  }
  return out;
}

std::string etag_of(const std::vector<Segment>& segments) {
  common::crypto::Md5 md5;
  for (const Segment& s : segments) md5.update(common::http::normalize_etag(s.hash));
  return "\"" + md5.hex_digest() + "\"";
}

namespace {
int64_t clamp64(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
}
}  // namespace

SegmentCursor::SegmentCursor(std::optional<uint64_t> first, std::optional<uint64_t> last)
    : first_(clamp64(first.value_or(0))), last_(clamp64(last.value_or(0))), to_end_(!last) {}

uint64_t SegmentCursor::Piece::size(uint64_t length) const {
  if (length == 0) return 0;
  uint64_t end = last.value_or(length - 1), start = first.value_or(0);
  return end >= start ? end - start + 1 : 0;
}

std::string SegmentCursor::Piece::range_header() const {
  if (!first && !last) return "";
  return "bytes=" + std::to_string(first.value_or(0)) + "-" +
         (last ? std::to_string(*last) : std::string());
}

SegmentCursor::Step SegmentCursor::next(uint64_t length, Piece* piece) {
  const int64_t len = clamp64(length);
  // Swift's order: a segment wholly before the wanted bytes is skipped (so are empty segments
  // before them) before the end of the wanted bytes is looked at.
  auto advance = [&] {
    first_ = std::max<int64_t>(first_ - len, -1);
    if (!to_end_) last_ = std::max<int64_t>(last_ - len, -1);
  };
  if (first_ >= len) {
    advance();
    return Step::kSkip;
  }
  if (!to_end_ && last_ < 0) return Step::kDone;
  piece->first = first_ <= 0 ? std::nullopt : std::optional<uint64_t>(first_);
  piece->last = (to_end_ || last_ >= len - 1) ? std::nullopt : std::optional<uint64_t>(last_);
  advance();
  return Step::kFetch;
}

double SegmentRateLimiter::wait_before_next(double now) {
  if (after_ > 0) {
    --after_;
    return 0;
  }
  if (rate_ <= 0) return 0;
  constexpr double kBufferMs = 5000;  // Swift's rate_buffer: 5 s of catching up allowed
  const double now_ms = now * 1000, per_segment_ms = 1000.0 / static_cast<double>(rate_);
  if (now_ms - running_ms_ > kBufferMs) running_ms_ = now_ms;
  double wait = now_ms >= running_ms_ ? 0 : (running_ms_ - now_ms) / 1000;
  running_ms_ += per_segment_ms;
  return wait;
}

}  // namespace dlo

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
// Swift reads a manifest's own body to the end (keeping the backend connection) only below
// this size; a longer one is abandoned.
constexpr uint64_t kDrainManifestBelow = 1024;
// A listing page: up to container_listing_limit names of up to 1024 bytes, which JSON may
// escape six-fold; this bounds what one page may hold in memory.
constexpr size_t kMaxListingBody = 64 << 20;
// Read-ahead per segment subrequest, and how early the next segment's GET starts.
constexpr size_t kReadAhead = 1 << 20;
// The size of the chunks handed to the client.
constexpr size_t kChunk = 64 << 10;
// How much of an error answer's body a log line quotes (Swift: 60 characters).
constexpr size_t kQuotedErrorBody = 60;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

net::awaitable<Status> ready() { co_return Status(); }

// Passes the answer of the client's request through, unless it is a DLO manifest's: then it
// keeps the head and drops the body (reading it only when short, as Swift drains it).
class ManifestProbe final : public ExchangeWrapper {
 public:
  using ExchangeWrapper::ExchangeWrapper;

  bool caught() const { return caught_; }
  const HeaderMap& manifest_headers() const { return headers_; }

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (!caught_) return ExchangeWrapper::write_body(chunk);
    drained_ += chunk.size();
    if (drained_ < kDrainManifestBelow) return ready();
    return cancelled();
  }
  net::awaitable<Status> finish_response() override {
    return caught_ ? ready() : ExchangeWrapper::finish_response();
  }
  bool response_started() const override {
    return caught_ || ExchangeWrapper::response_started();
  }
  int response_status() const override {
    return caught_ ? status_ : ExchangeWrapper::response_status();
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    if (!catches(r.status, r.headers)) return ExchangeWrapper::do_respond(std::move(r));
    return ready();
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    if (!catches(status, headers)) {
      return ExchangeWrapper::do_start_response(status, std::move(headers), length);
    }
    if (length && *length >= kDrainManifestBelow) drained_ = kDrainManifestBelow;
    return ready();
  }

 private:
  static net::awaitable<Status> cancelled() {
    co_return Status::cancelled("DLO manifest body not needed");
  }
  bool catches(int status, HeaderMap& headers) {
    if (!headers.contains("X-Object-Manifest")) return false;
    caught_ = true;
    status_ = status;
    headers_ = std::move(headers);
    return true;
  }

  bool caught_ = false;
  int status_ = 0;
  HeaderMap headers_;
  uint64_t drained_ = 0;
};

// What one DLO request knows: where its segments are, and how to ask the rest of the pipeline.
struct Context {
  const Next& next;
  const ProxyEnv& env;
  const Request& req;
  const dlo::Options& options;
  int64_t listing_limit;
  std::string version, account, container, prefix;
  std::string name;  // the manifest's path, for log lines
};

// A listing page, or the answer refusing it (Swift's: the container's own answer).
struct Page {
  std::optional<Response> refusal;
  std::vector<dlo::Segment> segments;
};

net::awaitable<Page> list_page(const Context& c, const std::string& marker) {
  std::string query = "format=json&prefix=" + common::http::quote(c.prefix);
  if (!marker.empty()) query += "&marker=" + common::http::quote(marker);
  Request sub = make_subrequest("GET", "/" + c.version + "/" + c.account + "/" + c.container,
                                query, subrequest_headers(c.req, "DLO MultipartGET"));
  auto r = co_await run_subrequest(c.next, std::move(sub), subrequest_env(c.env, "DLO"),
                                   kMaxListingBody);
  Page page;
  if (!r.ok()) {
    APUS_LOG_ERROR("While processing manifest " + c.name + ", listing /" + c.account + "/" +
                   c.container + " failed: " + r.status().to_string());
    page.refusal = common::http::swob_response(500);
    co_return page;
  }
  if (r->status < 200 || r->status >= 300) {
    r->headers.erase("Content-Length");
    if (c.req.method == "HEAD") r->body.clear();
    page.refusal = std::move(*r);
    co_return page;
  }
  auto parsed = dlo::parse_listing(r->body);
  if (!parsed.ok()) {
    APUS_LOG_ERROR("While processing manifest " + c.name + ": " + parsed.status().to_string());
    page.refusal = common::http::swob_response(500);
    co_return page;
  }
  page.segments = std::move(*parsed);
  co_return page;
}

// The body of a DLO GET, chunk by chunk, from the listing's segments. Failures are Unavailable
// (a segment answered 5xx: Swift's 503) or Conflict (anything else: Swift's SegmentError and
// ListingIterError, a 409 before the first byte). close() must be awaited before destruction.
class SegmentStream {
 public:
  SegmentStream(const Context& c, std::vector<dlo::Segment> first_page, dlo::SegmentCursor cursor,
                const net::any_io_executor& executor)
      : c_(c),
        page_(std::move(first_page)),
        cursor_(cursor),
        limiter_(c.options.rate_limit_after_segment, c.options.rate_limit_segments_per_sec),
        wake_(executor) {
    for (auto& b : bufs_) b.resize(kChunk);
  }

  // The next bytes of the body, valid until the next call; empty at its end.
  net::awaitable<Result<std::string_view>> next_chunk() {
    for (;;) {
      if (!cur_) {
        auto opened = co_await take_next();
        if (!opened.ok()) co_return opened.status();
        if (!*opened) co_return std::string_view();
        cur_ = std::move(**opened);
      }
      maybe_prefetch();
      const size_t idx = held_ ? 1 - held_idx_ : 0;
      auto n = co_await cur_->sub->read(std::span(bufs_[idx].data(), kChunk));
      if (!n.ok()) co_return fail("while retrieving " + cur_->path + ": " + n.status().message());
      if (*n == 0) {
        if (cur_->got != cur_->expected) {
          co_return fail("Bad response length for " + cur_->path + ": expected " +
                         std::to_string(cur_->expected) + " bytes, got " +
                         std::to_string(cur_->got));
        }
        if (!cur_->etag.empty() && cur_->md5.hex_digest() != cur_->etag) {
          co_return fail("Bad MD5 checksum for " + cur_->path + ": headers had " + cur_->etag +
                         ", but object MD5 was actually " + cur_->md5.hex_digest());
        }
        co_await cur_->sub->close();
        cur_.reset();
        if (held_) {
          held_ = false;
          co_return std::string_view(bufs_[held_idx_].data(), held_size_);
        }
        continue;
      }
      if (cur_->got + *n > cur_->expected) {
        co_return fail("Too many bytes from " + cur_->path + ": more than the " +
                       std::to_string(cur_->expected) + " expected");
      }
      cur_->got += *n;
      if (!cur_->etag.empty()) cur_->md5.update(std::string_view(bufs_[idx].data(), *n));
      // Hold this chunk back; hand over the one held before.
      bool had = held_;
      size_t prev_idx = held_idx_, prev_size = held_size_;
      held_ = true;
      held_idx_ = idx;
      held_size_ = *n;
      if (had) co_return std::string_view(bufs_[prev_idx].data(), prev_size);
    }
  }

  // Ends every subrequest this stream started.
  net::awaitable<void> close() {
    co_await wait_prefetch();
    if (prefetched_ && prefetched_->ok() && **prefetched_) co_await (**prefetched_)->sub->close();
    prefetched_.reset();
    if (cur_) co_await cur_->sub->close();
    cur_.reset();
  }

 private:
  struct Open {
    std::unique_ptr<Subrequest> sub;
    std::string path;
    uint64_t expected = 0;  // bytes the listing (and the range) say it holds
    uint64_t got = 0;       // bytes read from it
    std::string etag;       // checked against the md5 of a whole read; empty: not checked
    common::crypto::Md5 md5;
  };
  using Opened = Result<std::optional<Open>>;

  Status fail(std::string why) {
    return Status::conflict("While processing manifest " + c_.name + ", " + std::move(why));
  }

  // Starts the next segment's GET in the background once little of the current one is left
  // to arrive.
  void maybe_prefetch() {
    if (prefetching_ || prefetched_ || no_more_) return;
    uint64_t arrived = cur_->got + cur_->sub->buffered();
    if (arrived + kReadAhead < cur_->expected) return;
    prefetching_ = true;
    common::spawn_logged(
        wake_.get_executor(),
        [this]() -> net::awaitable<void> {
          Opened r = co_await open_next();
          prefetched_ = std::move(r);
          prefetching_ = false;
          wake_.cancel();
        },
        "DLO segment prefetch for " + c_.name,
        [this] {
          prefetched_ = Opened(Status::io_error("segment prefetch failed"));
          prefetching_ = false;
          wake_.cancel();
        });
  }

  net::awaitable<void> wait_prefetch() {
    while (prefetching_) {
      wake_.expires_at(net::steady_timer::time_point::max());
      auto [ec] = co_await wake_.async_wait(kTuple);
      (void)ec;
    }
  }

  net::awaitable<Opened> take_next() {
    co_await wait_prefetch();
    if (prefetched_) {
      Opened r = std::move(*prefetched_);
      prefetched_.reset();
      co_return r;
    }
    co_return co_await open_next();
  }

  // The next segment wanted, its GET started and its head checked; nullopt after the last.
  net::awaitable<Opened> open_next() {
    for (;;) {
      if (index_ == page_.size()) {
        if (static_cast<int64_t>(page_.size()) < c_.listing_limit || cursor_.done()) break;
        std::string marker = page_.back().name;
        Page next = co_await list_page(c_, marker);
        if (next.refusal) {
          co_return Status::conflict("Got status " + std::to_string(next.refusal->status) +
                                     " listing container /" + c_.account + "/" + c_.container);
        }
        page_ = std::move(next.segments);
        index_ = 0;
        continue;
      }
      const dlo::Segment& seg = page_[index_++];
      dlo::SegmentCursor::Piece piece;
      auto step = cursor_.next(seg.bytes, &piece);
      if (step == dlo::SegmentCursor::Step::kSkip) continue;
      if (step == dlo::SegmentCursor::Step::kDone) break;
      if (double wait = limiter_.wait_before_next(now_seconds()); wait > 0) {
        net::steady_timer t(wake_.get_executor(),
                            std::chrono::duration_cast<net::steady_timer::duration>(
                                std::chrono::duration<double>(wait)));
        auto [ec] = co_await t.async_wait(kTuple);
        (void)ec;
      }
      co_return co_await start_segment(seg, piece);
    }
    no_more_ = true;
    co_return std::optional<Open>();
  }

  net::awaitable<Opened> start_segment(const dlo::Segment& seg,
                                       const dlo::SegmentCursor::Piece& piece) {
    Open o;
    o.path = "/" + c_.version + "/" + c_.account + "/" + c_.container + "/" + seg.name;
    o.expected = piece.size(seg.bytes);
    Request sub = make_subrequest("GET", o.path, "multipart-manifest=get",
                                  subrequest_headers(c_.req, "DLO MultipartGET"));
    std::string range = piece.range_header();
    if (!range.empty()) sub.headers.set("Range", range);
    o.sub = co_await Subrequest::start(c_.next, std::move(sub), subrequest_env(c_.env, "DLO"),
                                       kReadAhead);
    const int status = o.sub->status();
    if (status < 200 || status >= 300) {
      auto body = co_await o.sub->read_all(4096);
      co_await o.sub->close();
      std::string quoted = body.ok() ? *body : "";
      if (quoted.size() > kQuotedErrorBody) quoted = quoted.substr(0, kQuotedErrorBody - 3) + "...";
      std::string msg = "While processing manifest " + c_.name + ", got " +
                        std::to_string(status) + " (" + quoted + ") while retrieving " + o.path;
      if (status >= 500) co_return Status::unavailable(msg);
      co_return Status::conflict(msg);
    }
    if (auto length = o.sub->length(); length && *length != o.expected) {
      co_await o.sub->close();
      co_return fail("Object segment no longer valid: " + o.path + " is " +
                     std::to_string(*length) + " bytes, the listing says " +
                     std::to_string(o.expected));
    }
    if (range.empty()) {
      o.etag = std::string(common::http::normalize_etag(o.sub->headers().get_or("Etag", "")));
    }
    co_return std::optional<Open>(std::move(o));
  }

  const Context& c_;
  // The listing: the page being walked, the next entry in it, and the bytes wanted.
  std::vector<dlo::Segment> page_;
  size_t index_ = 0;
  dlo::SegmentCursor cursor_;
  dlo::SegmentRateLimiter limiter_;
  bool no_more_ = false;  // the listing walk found its end
  std::optional<Open> cur_;
  // The next segment, opened in the background (prefetching_ while under way).
  bool prefetching_ = false;
  std::optional<Opened> prefetched_;
  net::steady_timer wake_;  // waited on by wait_prefetch() only
  // Two chunk buffers: one holds the chunk held back, the other is read into.
  std::array<std::string, 2> bufs_;
  bool held_ = false;
  size_t held_idx_ = 0, held_size_ = 0;
};

class Dlo final : public Middleware {
 public:
  Dlo(dlo::Options options, const common::Constraints& constraints)
      : options_(options), constraints_(constraints) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 4, 4, true);
    if (!segs.ok()) {
      co_await next(ex, env);
      co_return;
    }
    if ((req.method == "GET" || req.method == "HEAD") &&
        common::http::query_param(req.query(), "multipart-manifest") != "get") {
      co_await get_or_head(ex, env, next, *(*segs)[0], *(*segs)[1]);
      co_return;
    }
    if (req.method == "PUT") {
      if (auto bad = dlo::check_manifest_header(req.headers)) {
        co_return co_await ex.reply(std::move(*bad));
      }
    }
    co_await next(ex, env);
  }

 private:
  net::awaitable<void> get_or_head(Exchange& ex, ProxyEnv& env, const Next& next,
                                   std::string version, std::string account) {
    ManifestProbe probe(ex);
    // A manifest's Range is the large object's: the object server answers it whole.
    HeaderMap& h = probe.mutable_request().headers;
    std::string ignore(h.get_or("X-Backend-Ignore-Range-If-Metadata-Present", ""));
    h.set("X-Backend-Ignore-Range-If-Metadata-Present",
          ignore.empty() ? "X-Object-Manifest" : ignore + ",X-Object-Manifest");
    co_await next(probe, env);
    if (!probe.caught()) co_return;
    HeaderMap headers = probe.manifest_headers();
    auto where = dlo::split_manifest(
        common::http::percent_decode(headers.get_or("X-Object-Manifest", "")));
    if (!where) {
      // Swift fails the same way (its split raises; catch_errors answers).
      Response r = common::http::swob_response(500);
      r.body = "An error occurred";
      co_return co_await ex.reply(std::move(r));
    }
    Context c{next,
              env,
              ex.request(),
              options_,
              constraints_.container_listing_limit,
              std::move(version),
              std::move(account),
              std::move(where->first),
              std::move(where->second),
              std::string(ex.request().path())};
    co_await serve(ex, c, std::move(headers));
  }

  net::awaitable<void> serve(Exchange& ex, const Context& c, HeaderMap headers) {
    const Request& req = ex.request();
    Page page = co_await list_page(c, "");
    if (page.refusal) co_return co_await ex.reply(std::move(*page.refusal));
    const std::vector<dlo::Segment>& segments = page.segments;
    const bool complete = static_cast<int64_t>(segments.size()) < c.listing_limit;
    uint64_t page_bytes = 0;
    for (const auto& s : segments) page_bytes += s.bytes;

    // Swift honours one range only, and only when this first page tells whether it can be
    // served; otherwise (several ranges, or a range past an incomplete page) the whole object.
    std::optional<common::http::ByteRange> range;
    std::optional<uint64_t> swob_length;  // the length Content-Range is given against
    if (auto value = req.headers.get("Range")) {
      auto specs = common::http::parse_range_header(*value);
      if (specs && specs->size() == 1) {
        const auto& s = specs->front();
        const bool bounded_end = s.first && s.last;  // "a-b": known end without the total
        if (complete || (bounded_end && *s.last + 1 < page_bytes)) {
          auto ranges = common::http::ranges_for_length(*specs, page_bytes);
          if (ranges.empty()) {
            Response r = common::http::swob_response(416);
            r.headers.set("Accept-Ranges", "bytes");
            if (complete) {
              r.headers.set("Content-Range", common::http::unsatisfied_content_range(page_bytes));
            }
            if (req.method == "HEAD") r.body.clear();
            co_return co_await ex.reply(std::move(r));
          }
          swob_length = page_bytes;
          if (page_bytes > 0) range = ranges.front();
        }
      }
    }
    headers.erase("Content-Length");
    headers.erase("Content-Range");
    std::optional<uint64_t> length;
    if (swob_length) {
      length = *swob_length;
    } else if (complete) {
      length = page_bytes;
    }
    if (complete) headers.set("Etag", dlo::etag_of(segments));

    std::optional<dlo::SegmentCursor> cursor;
    if (range) {
      cursor.emplace(range->start, range->end - 1);
    } else {
      cursor.emplace(std::nullopt, std::nullopt);
    }
    if (req.method == "HEAD") {
      if (auto refused = conditional(req, headers)) co_return co_await ex.reply(std::move(*refused));
      if (!length) {
        // More segments than a page: the length is unknown, so none is announced (a whole
        // answer would say 0).
        if ((co_await ex.start_response(200, std::move(headers), std::nullopt)).ok()) {
          (void)co_await ex.finish_response();
        }
        co_return;
      }
      Response r;
      r.headers = std::move(headers);
      r.headers.set("Content-Length", std::to_string(*length));
      co_return co_await ex.reply(std::move(r));
    }
    SegmentStream stream(c, std::move(page.segments), *cursor, co_await net::this_coro::executor);
    co_await stream_body(ex, c, stream, std::move(headers), length, range);
    co_await stream.close();
  }

  // swob's conditional answer (304, 412) for the large object's etag and Last-Modified.
  static std::optional<Response> conditional(const Request& req, const HeaderMap& headers) {
    std::optional<int64_t> last_modified;
    if (auto lm = headers.get("Last-Modified")) last_modified = common::http::parse_http_date(*lm);
    auto outcome = common::http::evaluate_conditional(
        req.headers, {.etag = common::http::normalize_etag(headers.get_or("Etag", "")),
                      .last_modified = last_modified,
                      .not_found = false});
    if (outcome == common::http::ConditionalOutcome::kProceed) return std::nullopt;
    Response r;
    r.status = outcome == common::http::ConditionalOutcome::kNotModified ? 304 : 412;
    r.headers = headers;
    r.headers.set("Content-Length", "0");
    return r;
  }

  net::awaitable<void> stream_body(Exchange& ex, const Context& c, SegmentStream& stream,
                                   HeaderMap headers, std::optional<uint64_t> length,
                                   std::optional<common::http::ByteRange> range) {
    const Request& req = ex.request();
    const double start = now_seconds();
    // Swift fetches up to the first bytes before it answers: a first segment that is missing
    // or bad makes the answer a 409 (503 when it got a server error).
    auto first = co_await stream.next_chunk();
    if (!first.ok()) {
      APUS_LOG_ERROR(first.status().message());
      if (first.status().code() == Status::Code::kUnavailable) {
        Response r = common::http::swob_response(503);
        r.headers.set("Content-Type", "text/plain");
        co_return co_await ex.reply(std::move(r));
      }
      co_return co_await ex.reply(common::http::swob_response(409));
    }
    if (auto refused = conditional(req, headers)) co_return co_await ex.reply(std::move(*refused));
    int status = 200;
    if (range) {
      status = 206;
      headers.set("Content-Range", common::http::content_range_value(*range, *length));
      length = range->size();
    }
    if (!(co_await ex.start_response(status, std::move(headers), length)).ok()) co_return;
    uint64_t sent = 0;
    std::string_view chunk = *first;
    while (!chunk.empty()) {
      if (length && sent + chunk.size() > *length) {
        APUS_LOG_ERROR("Too many bytes for " + c.name + "; truncating with " +
                       std::to_string(sent + chunk.size() - *length) + " bytes left");
        co_return;
      }
      if (!(co_await ex.write_body(chunk)).ok()) co_return;
      sent += chunk.size();
      if (now_seconds() - start > static_cast<double>(c.options.max_get_time)) {
        APUS_LOG_ERROR("While processing manifest " + c.name + ", max LO GET time of " +
                       std::to_string(c.options.max_get_time) + "s exceeded");
        co_return;
      }
      auto next = co_await stream.next_chunk();
      if (!next.ok()) {
        APUS_LOG_ERROR(next.status().message());
        co_return;  // the client sees a short body
      }
      chunk = *next;
    }
    if (length && sent != *length) {
      APUS_LOG_ERROR("Expected another " + std::to_string(*length - sent) + " bytes for " +
                     c.name + "; closing connection");
      co_return;
    }
    (void)co_await ex.finish_response();
  }

  const dlo::Options options_;
  const common::Constraints& constraints_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_dlo(const common::Section& section,
                                             const MiddlewareContext& context) {
  auto options = dlo::parse_options(section);
  if (!options.ok()) return options.status();
  return std::unique_ptr<Middleware>(
      std::make_unique<Dlo>(*options, context.swift.constraints));
}

}  // namespace apus::proxy
