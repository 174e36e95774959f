// dlo (dlo.h): a GET or HEAD goes on down the pipeline as it came (with
// X-Backend-Ignore-Range-If-Metadata-Present naming X-Object-Manifest, so the object server
// ignores a Range for a manifest); an answer without X-Object-Manifest passes through untouched.
// An answer with it, whatever its status (the object server's 304/412/416 carry the manifest's
// headers too), is dropped and replaced by the large object's: a listing subrequest, then the
// segments streamed by SegmentedBody (segmented_body.h: prefetching, checks, rate limit).
#include "proxy/dlo.h"

#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>
#include <algorithm>
#include <chrono>
#include <limits>

#include "common/crypto/md5.h"
#include "common/http/date.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/log/log.h"
#include "proxy/segmented_body.h"
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

Result<Options> parse_options(const common::Section& section, const common::Section* app) {
  static constexpr std::string_view kKeys[] = {"max_get_time", "rate_limit_after_segment",
                                               "rate_limit_segments_per_sec"};
  // DLO was part of the proxy app once: a dlo section that sets none of its settings takes
  // them from the app's section, as Swift does for upgraded clusters.
  const common::Section* from = &section;
  if (app != nullptr && std::none_of(std::begin(kKeys), std::end(kKeys),
                                     [&](std::string_view k) { return section.has(k); })) {
    from = app;
  }
  Options o;
  APUS_ASSIGN_OR_RETURN(o.max_get_time, from->get_int("max_get_time", 86400));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_after_segment,
                        from->get_int("rate_limit_after_segment", 10));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_segments_per_sec,
                        from->get_int("rate_limit_segments_per_sec", 1));
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

}  // namespace dlo

namespace {

// Swift reads a manifest's own body to the end (keeping the backend connection) only below
// this size; a longer one is abandoned.
constexpr uint64_t kDrainManifestBelow = 1024;
// A listing page: up to container_listing_limit names of up to 1024 bytes, which JSON may
// escape six-fold; this bounds what one page may hold in memory.
constexpr size_t kMaxListingBody = 64 << 20;

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

// The pieces of a DLO's body: its listing's segments, page by page, and which bytes of each
// the GET wants.
class ListingPieces final : public PieceSource {
 public:
  ListingPieces(const Context& c, std::vector<dlo::Segment> first_page, dlo::SegmentCursor cursor)
      : c_(c), page_(std::move(first_page)), cursor_(cursor) {}

  net::awaitable<Result<std::optional<BodyPiece>>> next() override {
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
      BodyPiece p;
      p.path = "/" + c_.version + "/" + c_.account + "/" + c_.container + "/" + seg.name;
      p.range = piece.range_header();
      p.expected = piece.size(seg.bytes);
      co_return std::optional<BodyPiece>(std::move(p));
    }
    co_return std::optional<BodyPiece>();
  }

 private:
  const Context& c_;
  // The page being walked, the next entry in it, and the bytes wanted.
  std::vector<dlo::Segment> page_;
  size_t index_ = 0;
  dlo::SegmentCursor cursor_;
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
    ListingPieces pieces(c, std::move(page.segments), *cursor);
    SegmentedBody body(c.next, c.env, c.req,
                       {.name = c.name,
                        .agent = "DLO MultipartGET",
                        .source = "DLO",
                        .rate_limit_after_segment = c.options.rate_limit_after_segment,
                        .rate_limit_segments_per_sec = c.options.rate_limit_segments_per_sec,
                        .max_get_time = c.options.max_get_time},
                       pieces, co_await net::this_coro::executor);
    co_await stream_body(ex, c, body, std::move(headers), length, range);
    co_await body.close();
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

  net::awaitable<void> stream_body(Exchange& ex, const Context& c, SegmentedBody& stream,
                                   HeaderMap headers, std::optional<uint64_t> length,
                                   std::optional<common::http::ByteRange> range) {
    const Request& req = ex.request();
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
  auto options = dlo::parse_options(section, context.app);
  if (!options.ok()) return options.status();
  return std::unique_ptr<Middleware>(
      std::make_unique<Dlo>(*options, context.swift.constraints));
}

}  // namespace apus::proxy
