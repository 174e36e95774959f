// segmented_body (segmented_body.h): a large object's body from its segments, for SLO and DLO.
#include "proxy/segmented_body.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <span>

#include "common/async.h"
#include "common/crypto/md5.h"
#include "common/http/headers.h"
#include "common/http/range.h"
#include "proxy/subrequest.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Request;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
// Read-ahead per segment subrequest, and how early the next segment's GET starts.
constexpr size_t kReadAhead = 1 << 20;
// The size of the chunks handed over.
constexpr size_t kChunk = 64 << 10;
// How much of a segment's error answer a message quotes (Swift: 60 characters).
constexpr size_t kQuotedErrorBody = 60;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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

// A piece being read: inline bytes not handed over yet, or a segment GET under way.
struct SegmentedBody::Open {
  BodyPiece piece;
  std::unique_ptr<Subrequest> sub;
  size_t data_pos = 0;
  uint64_t got = 0;         // bytes read from the segment
  std::string etag;  // checked against the md5 of a whole read; "" unchecked (or verified)
  common::crypto::Md5 md5;
};

SegmentedBody::SegmentedBody(const Next& app, const ProxyEnv& env, const Request& client,
                             SegmentedOptions options, PieceSource& source,
                             const net::any_io_executor& executor)
    : app_(app),
      env_(env),
      client_(client),
      options_(std::move(options)),
      source_(source),
      limiter_(options_.rate_limit_after_segment, options_.rate_limit_segments_per_sec),
      started_(std::chrono::steady_clock::now()),
      wake_(executor) {
  for (auto& b : bufs_) b.resize(kChunk);
}

SegmentedBody::~SegmentedBody() = default;

Status SegmentedBody::fail(std::string why) const {
  return Status::conflict("While processing manifest " + options_.name + ", " + std::move(why));
}

void SegmentedBody::resume() { no_more_ = false; }

net::awaitable<Result<std::string_view>> SegmentedBody::next_chunk() {
  for (;;) {
    if (!cur_) {
      auto opened = co_await take_next();
      if (!opened.ok()) co_return opened.status();
      if (!*opened) co_return std::string_view();
      cur_ = std::make_unique<Open>(std::move(**opened));
    }
    if (cur_->piece.is_data) {
      // Inline bytes are known good: whatever was held back goes first, then they go whole.
      if (held_) {
        held_ = false;
        co_return std::string_view(bufs_[held_idx_].data(), held_size_);
      }
      std::string_view rest = std::string_view(cur_->piece.data).substr(cur_->data_pos);
      if (rest.empty()) {
        cur_.reset();
        continue;
      }
      // Handed over in place: the piece lives until the next call moves past it.
      const size_t n = std::min(rest.size(), kChunk);
      cur_->data_pos += n;
      co_return rest.substr(0, n);
    }
    maybe_prefetch();
    const size_t idx = held_ ? 1 - held_idx_ : 0;
    auto n = co_await cur_->sub->read(std::span(bufs_[idx].data(), kChunk));
    if (!n.ok()) {
      co_return fail("while retrieving " + cur_->piece.path + ": " + n.status().message());
    }
    if (*n == 0) {
      auto last = co_await finish_segment();
      if (!last.ok() || !last->empty()) co_return last;
      continue;
    }
    if (cur_->got + *n > cur_->piece.expected) {
      co_return fail("Too many bytes from " + cur_->piece.path + ": more than the " +
                     std::to_string(cur_->piece.expected) + " expected");
    }
    cur_->got += *n;
    if (!cur_->etag.empty()) cur_->md5.update(std::string_view(bufs_[idx].data(), *n));
    // Hold this chunk back; hand over the one held before.
    const bool had = held_;
    const size_t prev_idx = held_idx_, prev_size = held_size_;
    held_ = true;
    held_idx_ = idx;
    held_size_ = *n;
    if (had) co_return std::string_view(bufs_[prev_idx].data(), prev_size);
  }
}

// The current segment's body ended: checks it, and hands over the chunk held back (empty when
// there is none).
net::awaitable<Result<std::string_view>> SegmentedBody::finish_segment() {
  Open& o = *cur_;
  if (o.got != o.piece.expected) {
    co_return fail("Bad response length for " + o.piece.path + ": expected " +
                   std::to_string(o.piece.expected) + " bytes, got " + std::to_string(o.got));
  }
  if (!o.etag.empty() && o.md5.hex_digest() != o.etag) {
    co_return fail("Bad MD5 checksum for " + o.piece.path + ": headers had " + o.etag +
                   ", but object MD5 was actually " + o.md5.hex_digest());
  }
  co_await o.sub->close();
  cur_.reset();
  if (!held_) co_return std::string_view();
  held_ = false;
  co_return std::string_view(bufs_[held_idx_].data(), held_size_);
}

net::awaitable<void> SegmentedBody::close() {
  co_await wait_prefetch();
  if (prefetched_ && prefetched_->ok() && **prefetched_ && (**prefetched_)->sub) {
    co_await (**prefetched_)->sub->close();
  }
  prefetched_.reset();
  if (cur_ && cur_->sub) co_await cur_->sub->close();
  cur_.reset();
}

// Starts the next piece in the background once little of the current segment is left to
// arrive.
void SegmentedBody::maybe_prefetch() {
  if (prefetching_ || prefetched_ || no_more_) return;
  const uint64_t arrived = cur_->got + cur_->sub->buffered();
  if (arrived + kReadAhead < cur_->piece.expected) return;
  prefetching_ = true;
  common::spawn_logged(
      wake_.get_executor(),
      [this]() -> net::awaitable<void> {
        Opened r = co_await open_next();
        prefetched_ = std::make_unique<Opened>(std::move(r));
        prefetching_ = false;
        wake_.cancel();
      },
      "segment prefetch for " + options_.name,
      [this] {
        prefetched_ = std::make_unique<Opened>(Status::io_error("segment prefetch failed"));
        prefetching_ = false;
        wake_.cancel();
      });
}

net::awaitable<void> SegmentedBody::wait_prefetch() {
  while (prefetching_) {
    wake_.expires_at(net::steady_timer::time_point::max());
    auto [ec] = co_await wake_.async_wait(kTuple);
    (void)ec;
  }
}

net::awaitable<SegmentedBody::Opened> SegmentedBody::take_next() {
  co_await wait_prefetch();
  if (prefetched_) {
    Opened r = std::move(*prefetched_);
    prefetched_.reset();
    co_return r;
  }
  if (no_more_) co_return std::optional<Open>();
  co_return co_await open_next();
}

// The next piece, a segment's GET started and its head checked; nullopt after the last.
net::awaitable<SegmentedBody::Opened> SegmentedBody::open_next() {
  auto piece = co_await source_.next();
  if (!piece.ok()) co_return piece.status();
  if (!*piece) {
    no_more_ = true;
    co_return std::optional<Open>();
  }
  if ((*piece)->is_data) {
    Open o;
    o.piece = std::move(**piece);
    co_return std::optional<Open>(std::move(o));
  }
  if ((*piece)->rate_limited) {
    if (double wait = limiter_.wait_before_next(now_seconds()); wait > 0) {
      net::steady_timer t(wake_.get_executor(),
                          std::chrono::duration_cast<net::steady_timer::duration>(
                              std::chrono::duration<double>(wait)));
      auto [ec] = co_await t.async_wait(kTuple);
      (void)ec;
    }
  }
  // Swift's check, made before each segment's GET: a segment once started streams to its end.
  if (std::chrono::steady_clock::now() - started_ > std::chrono::seconds(options_.max_get_time)) {
    co_return Status::timeout("While processing manifest " + options_.name +
                              ", max LO GET time of " + std::to_string(options_.max_get_time) +
                              "s exceeded");
  }
  co_return co_await start_segment(std::move(**piece));
}

net::awaitable<SegmentedBody::Opened> SegmentedBody::start_segment(BodyPiece piece) {
  Open o;
  o.piece = std::move(piece);
  const std::string& path = o.piece.path;
  Request get = make_subrequest("GET", path, "multipart-manifest=get",
                                subrequest_headers(client_, options_.agent));
  if (!o.piece.range.empty()) get.headers.set("Range", o.piece.range);
  // A whole segment is checked against its etag: by an Apus object server before its last
  // chunk goes out (a verified read), or here, hashing every byte, when a Swift one answers.
  if (o.piece.range.empty()) get.headers.set(common::http::kVerifiedReadHeader, "yes");
  o.sub = co_await Subrequest::start(app_, std::move(get), subrequest_env(env_, options_.source),
                                     kReadAhead);
  const int status = o.sub->status();
  if (status < 200 || status >= 300) {
    auto body = co_await o.sub->read_all(4096);
    co_await o.sub->close();
    std::string quoted = body.ok() ? *body : "";
    if (quoted.size() > kQuotedErrorBody) quoted = quoted.substr(0, kQuotedErrorBody - 3) + "...";
    std::string msg = "While processing manifest " + options_.name + ", got " +
                      std::to_string(status) + " (" + quoted + ") while retrieving " + path;
    if (status >= 500) co_return Status::unavailable(msg);
    co_return Status::conflict(msg);
  }
  const std::string etag(common::http::normalize_etag(o.sub->headers().get_or("Etag", "")));
  const auto length = o.sub->length();
  if ((!o.piece.etag.empty() && etag != o.piece.etag) ||
      (length && *length != o.piece.expected)) {
    co_await o.sub->close();
    co_return fail("Object segment no longer valid: " + path + " etag: " + etag +
                   " != " + o.piece.etag + " or " +
                   (length ? std::to_string(*length) : std::string("None")) + " != " +
                   std::to_string(o.piece.expected) + ".");
  }
  if (o.piece.range.empty() && !o.sub->headers().contains(common::http::kVerifiedReadHeader)) {
    o.etag = etag;
  }
  co_return std::optional<Open>(std::move(o));
}

}  // namespace apus::proxy
