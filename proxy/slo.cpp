// slo: see slo.h. The manifest rules, formats and range arithmetic are in slo_manifest.{h,cpp};
// this file makes the subrequests and answers.
#include "proxy/slo.h"

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <variant>

#include "common/config/swift_conf.h"
#include "common/constraints.h"
#include "common/crypto/md5.h"
#include "common/expiring_queue.h"
#include "common/hash_path.h"
#include "common/http/date.h"
#include "common/http/headers.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "common/timestamp.h"
#include "proxy/bulk.h"
#include "proxy/segmented_body.h"
#include "proxy/slo_manifest.h"
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
using common::http::swob_response;
using slo::StoredSegment;

namespace {

constexpr std::string_view kSysmetaEtag = "X-Object-Sysmeta-Slo-Etag";
constexpr std::string_view kSysmetaSize = "X-Object-Sysmeta-Slo-Size";
constexpr std::string_view kOverrideEtag = "X-Object-Sysmeta-Container-Update-Override-Etag";
// The most manifest bytes a GET keeps in memory (Swift has no bound; ours is far above what
// max_manifest_segments entries take).
constexpr size_t kMaxStoredManifest = 64 * 1024 * 1024;
constexpr size_t kChunk = 64 * 1024;
// Swift's MAX_CONTAINER_LISTING_CONTENT_LENGTH: larger listings pass untouched.
constexpr uint64_t kMaxListingLength = 1024 * 10000 * 2;  // listing_formats.py, 2.30

struct Options {
  int64_t max_manifest_segments = slo::kDefaultMaxManifestSegments;
  int64_t max_manifest_size = slo::kDefaultMaxManifestSize;
  int64_t yield_frequency = slo::kDefaultYieldFrequency;
  bool allow_async_delete = false;
  int64_t max_get_time = 86400;
  int64_t rate_limit_under_size = slo::kDefaultRateLimitUnderSize;
  int64_t rate_limit_after_segment = 10;
  int64_t rate_limit_segments_per_sec = 1;
  int concurrency = 2;         // segment HEADs of a manifest PUT at a time
  int delete_concurrency = 2;  // segment DELETEs of ?multipart-manifest=delete at a time
  // Where allow_async_delete queues segments for the expirer.
  std::string expiring_objects_account = ".expiring_objects";
  int64_t expiring_objects_container_divisor = common::kExpiringObjectsContainerDivisor;
};

std::string status_line(int status) {
  return std::to_string(status) + " " + std::string(common::http::reason_phrase(status));
}

// What Swift reports as the body of an error it made without one: its reason and explanation.
std::string reason_and_explanation(int status) {
  std::string out(common::http::reason_phrase(status));
  std::string_view more = common::http::swob_explanation(status);
  if (!more.empty()) out += "\n" + std::string(more);
  return out;
}

bool is_success(int status) { return status >= 200 && status < 300; }

bool is_slo(const HeaderMap& h) {
  return common::config_true_value(h.get_or("X-Static-Large-Object", ""));
}

std::string normalized_etag(const HeaderMap& h) {
  return std::string(common::http::normalize_etag(h.get_or("Etag", "")));
}

std::optional<int64_t> header_int(const HeaderMap& h, std::string_view name) {
  auto v = h.get(name);
  if (!v) return std::nullopt;
  return common::parse_python_int(*v);
}

// Python's mimetypes.guess_type() by extension, from /etc/mime.types (as the proxy app does for
// a PUT without Content-Type).
std::string guess_content_type(std::string_view object) {
  static const auto* types = [] {
    auto* m = new std::unordered_map<std::string, std::string>;
    std::ifstream in("/etc/mime.types");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string type, ext;
      words >> type;
      while (words >> ext) m->emplace(ext, type);
    }
    return m;
  }();
  size_t slash = object.rfind('/');
  std::string_view base = slash == std::string_view::npos ? object : object.substr(slash + 1);
  size_t dot = base.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string ext(base.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = types->find(ext);
  return it == types->end() ? "application/octet-stream" : it->second;
}

// The format of a bulk-style answer: Accept's best match among Swift's ACCEPTABLE_FORMATS, or
// nullopt when none is acceptable or the header is bad.
std::optional<std::string> out_format(const Request& req) {
  auto n = common::listing::negotiate(std::nullopt, req.headers.get("Accept"));
  if (n.status != 0) return std::nullopt;
  return n.content_type;
}

// Passes an answer through unless it is an SLO manifest's: then its head and body are kept for
// the middleware.
class ManifestCatcher final : public ExchangeWrapper {
 public:
  ManifestCatcher(Exchange& inner, Request req) : ExchangeWrapper(inner, std::move(req)) {}
  bool caught = false;
  bool too_big = false;
  int status = 0;
  HeaderMap headers;
  std::string body;

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (!caught) return ExchangeWrapper::write_body(chunk);
    return keep(chunk);
  }
  net::awaitable<Status> finish_response() override {
    if (!caught) return ExchangeWrapper::finish_response();
    return ok();
  }
  bool response_started() const override {
    return caught ? true : ExchangeWrapper::response_started();
  }
  int response_status() const override {
    return caught ? status : ExchangeWrapper::response_status();
  }

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    if (!is_slo(r.headers)) return ExchangeWrapper::do_respond(std::move(r));
    catch_head(r.status, std::move(r.headers));
    return keep(r.body);
  }
  net::awaitable<Status> do_start_response(int st, HeaderMap h,
                                           std::optional<uint64_t> len) override {
    if (!is_slo(h)) return ExchangeWrapper::do_start_response(st, std::move(h), len);
    catch_head(st, std::move(h));
    return ok();
  }

 private:
  void catch_head(int st, HeaderMap h) {
    caught = true;
    status = st;
    headers = std::move(h);
  }
  net::awaitable<Status> keep(std::string_view chunk) {
    if (body.size() + chunk.size() > kMaxStoredManifest) {
      too_big = true;
      co_return Status::cancelled("SLO manifest too large");
    }
    body.append(chunk);
    co_return Status();
  }
  static net::awaitable<Status> ok() { co_return Status(); }
};

// Walks the segments of one byte range of a large object, descending into nested SLOs (whose
// manifests it fetches), one piece at a time.
class SegmentWalker final : public PieceSource {
 public:
  SegmentWalker(const Next& next, const Request& req, const ProxyEnv& env, std::string prefix,
                std::shared_ptr<const std::vector<StoredSegment>> top, const Options& opts)
      : next_(next), req_(req), env_(env), prefix_(std::move(prefix)), top_(std::move(top)),
        opts_(opts) {}

  void start_range(int64_t first, int64_t last) {
    stack_.clear();
    stack_.push_back({top_, slo::pieces_for_range(*top_, first, last), 0, 1});
  }

  // The next piece; nullopt at the end of the range; a failed Result says why the listing broke.
  net::awaitable<Result<std::optional<BodyPiece>>> next() override {
    while (!stack_.empty()) {
      Frame& f = stack_.back();
      if (f.pos == f.pieces.size()) {
        stack_.pop_back();
        continue;
      }
      const slo::Piece p = f.pieces[f.pos++];
      auto segs = f.segments;  // keeps the segment alive across the push below
      const StoredSegment& s = (*segs)[p.index];
      if (s.is_data) {
        BodyPiece d;
        d.is_data = true;
        d.data = s.data.substr(p.first, p.last - p.first + 1);
        d.expected = d.data.size();
        co_return std::optional<BodyPiece>(std::move(d));
      }
      if (s.sub_slo) {
        if (f.depth >= slo::kMaxRecursionDepth) {
          co_return Status::invalid_argument("While processing manifest " + std::string(req_.path()) +
                                             ", max recursion depth was exceeded");
        }
        int depth = f.depth + 1;
        auto sub = co_await fetch_sub(s.name);
        if (!sub.ok()) co_return sub.status();
        stack_.push_back({*sub, slo::pieces_for_range(**sub, p.first, p.last), 0, depth});
        continue;
      }
      BodyPiece seg;
      seg.path = prefix_ + (s.name.starts_with('/') ? s.name.substr(1) : s.name);
      seg.etag = s.hash;
      seg.expected = static_cast<uint64_t>(p.last - p.first + 1);
      if (p.first != 0 || p.last != s.bytes - 1) {
        seg.range = "bytes=" + std::to_string(p.first) + "-" +
                    (p.last == s.bytes - 1 ? std::string() : std::to_string(p.last));
      }
      // Swift limits the rate of small pieces only: big ones take long enough on their own.
      seg.rate_limited = p.last - p.first + 1 < opts_.rate_limit_under_size;
      co_return std::optional<BodyPiece>(std::move(seg));
    }
    co_return std::optional<BodyPiece>();
  }

 private:
  struct Frame {
    std::shared_ptr<const std::vector<StoredSegment>> segments;
    std::vector<slo::Piece> pieces;
    size_t pos = 0;
    int depth = 1;
  };

  net::awaitable<Result<std::shared_ptr<const std::vector<StoredSegment>>>> fetch_sub(
      const std::string& name) {
    if (auto it = cache_.find(name); it != cache_.end()) co_return it->second;
    std::string path = prefix_ + (name.starts_with('/') ? name.substr(1) : name);
    Request get = make_subrequest("GET", path, "", subrequest_headers(req_, "SLO"));
    auto r = co_await run_subrequest(next_, std::move(get), subrequest_env(env_, "SLO"),
                                     kMaxStoredManifest);
    if (!r.ok()) co_return r.status();
    if (!is_success(r->status)) {
      std::string body = r->body.size() <= 60 ? r->body : r->body.substr(0, 57) + "...";
      co_return Status::not_found("while fetching " + std::string(req_.path()) + ", GET of submanifest " +
                                  path + " failed with status " + std::to_string(r->status) +
                                  " (" + body + ")");
    }
    auto parsed = slo::parse_stored(r->body);
    if (!parsed.ok()) {
      co_return Status::corruption("while fetching " + std::string(req_.path()) +
                                   ", JSON-decoding of submanifest " + path + " failed");
    }
    auto shared = std::make_shared<const std::vector<StoredSegment>>(std::move(*parsed));
    if (cache_.size() >= 20) cache_.clear();  // Swift keeps 20 sub-manifests
    cache_.emplace(name, shared);
    co_return shared;
  }

  const Next& next_;
  const Request& req_;
  const ProxyEnv& env_;
  std::string prefix_;  // "/v1/<account>/"
  std::shared_ptr<const std::vector<StoredSegment>> top_;
  const Options& opts_;
  std::vector<Frame> stack_;
  std::map<std::string, std::shared_ptr<const std::vector<StoredSegment>>> cache_;
};

class Slo final : public Middleware {
 public:
  Slo(Options opts, const common::SwiftConf& swift, InfoLookup& info)
      : opts_(std::move(opts)), swift_(swift), info_(info) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(
        std::string("slo"),
        "{\"max_manifest_segments\": " + std::to_string(opts_.max_manifest_segments) +
            ", \"max_manifest_size\": " + std::to_string(opts_.max_manifest_size) +
            ", \"yield_frequency\": " + std::to_string(opts_.yield_frequency) +
            ", \"min_segment_size\": 1, \"allow_async_delete\": " +
            (opts_.allow_async_delete ? "true" : "false") + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (env.slo_override) co_return co_await next(ex, env);  // a container sync's raw manifest
    const Request& req = ex.request();
    auto parts = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!parts.ok()) co_return co_await next(ex, env);
    if (!(*parts)[3]) {
      if (req.method == "GET") co_return co_await container_listing(ex, env, next);
      co_return co_await next(ex, env);
    }
    auto mm = common::http::query_param(req.query(), "multipart-manifest");
    if (req.method == "PUT" && mm == "put") co_return co_await put_manifest(ex, env, next);
    if (req.method == "DELETE" && mm == "delete") {
      if (opts_.allow_async_delete &&
          common::config_true_value(common::http::query_param(req.query(), "async").value_or(""))) {
        co_return co_await async_delete(ex, env, next);
      }
      co_return co_await delete_manifest(ex, env, next);
    }
    if (req.method == "GET" || req.method == "HEAD") {
      co_return co_await get_or_head(ex, env, next, mm == "get");
    }
    if (req.headers.contains("X-Static-Large-Object")) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          400,
          "X-Static-Large-Object is a reserved header. To create a static large object add "
          "query param multipart-manifest=put."));
    }
    co_await next(ex, env);
  }

 private:
  // ---- PUT ?multipart-manifest=put ----------------------------------------------------------

  struct SegmentCheck {
    int64_t length = 0;
    std::optional<StoredSegment> stored;
  };

  // Swift's validate_seg_dict(): the stored entry for segment `in` from its HEAD answer, with
  // any problem added to `problems`.
  static SegmentCheck check_segment(const slo::InputSegment& in, const Response& head,
                                    bool allow_empty, std::vector<slo::BulkError>& problems) {
    SegmentCheck out;
    const std::string quoted = common::http::quote(in.path);
    if (!is_success(head.status)) {
      problems.push_back({quoted, status_line(head.status)});
      return out;
    }
    int64_t size = header_int(head.headers, "Content-Length").value_or(0);
    int64_t length = size;
    std::optional<std::pair<int64_t, int64_t>> range;
    if (in.range) {
      auto ranges = common::http::ranges_for_length({*in.range}, static_cast<uint64_t>(size));
      if (ranges.empty()) {
        problems.push_back({quoted, "Unsatisfiable Range"});
      } else if (ranges[0].start == 0 && ranges[0].end == static_cast<uint64_t>(size)) {
        length = size;  // the whole object: no range stored
      } else {
        range = std::make_pair(static_cast<int64_t>(ranges[0].start),
                               static_cast<int64_t>(ranges[0].end) - 1);
        length = static_cast<int64_t>(ranges[0].size());
      }
    }
    if (length < 1 && !allow_empty) {
      problems.push_back({quoted, "Too small; each segment must be at least 1 byte."});
    }
    const std::string etag = normalized_etag(head.headers);
    if (in.size_bytes && *in.size_bytes != size) problems.push_back({quoted, "Size Mismatch"});
    if (in.etag && *in.etag != etag) problems.push_back({quoted, "Etag Mismatch"});
    StoredSegment s;
    s.name = "/" + std::string(std::string_view(in.path).substr(in.path.find_first_not_of('/')));
    s.bytes = size;
    s.hash = etag;
    std::string_view ct = head.headers.get_or("Content-Type", "");
    s.content_type = std::string(ct.substr(0, ct.find(';')));
    s.last_modified = iso_last_modified(head.headers.get_or("Last-Modified", ""));
    s.range = range;
    s.sub_slo = is_slo(head.headers);
    out.length = length;
    out.stored = std::move(s);
    return out;
  }

  // Last-Modified as Swift stores it in a manifest: '%Y-%m-%dT%H:%M:%S.%f'.
  static std::string iso_last_modified(std::string_view http_date) {
    auto t = common::http::parse_http_date(http_date);
    int64_t epoch = t ? *t : static_cast<int64_t>(std::time(nullptr));
    auto c = common::http::civil_from_epoch(epoch);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02d.000000",
                  static_cast<long long>(c.year), c.month, c.day, c.hour, c.minute, c.second);
    return buf;
  }

  net::awaitable<void> put_manifest(Exchange& ex, ProxyEnv& env, const Next& next) {
    const Request& req = ex.request();
    if (!req.headers.get_or("X-Copy-From", "").empty()) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          405, "Multipart Manifest PUTs cannot be COPY requests"));
    }
    if (!req.content_length && !req.chunked) co_return co_await ex.reply(swob_response(411));
    if (req.content_length &&
        *req.content_length > static_cast<uint64_t>(opts_.max_manifest_size)) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          413, "Manifest File > " + std::to_string(opts_.max_manifest_size) + " bytes"));
    }
    std::string body;
    std::array<char, kChunk> buf;
    while (body.size() < static_cast<size_t>(opts_.max_manifest_size)) {
      size_t want = std::min(buf.size(), static_cast<size_t>(opts_.max_manifest_size) - body.size());
      auto n = co_await ex.read_body(std::span<char>(buf.data(), want));
      if (!n.ok()) co_return co_await ex.reply(swob_response(499));
      if (*n == 0) break;
      body.append(buf.data(), *n);
    }
    const std::string path = common::http::percent_decode(req.path());
    auto parsed = slo::parse_manifest_input(body, path);
    if (!parsed) co_return co_await ex.reply(std::move(parsed).refusal());
    int64_t object_segments = 0;
    for (const auto& s : *parsed) object_segments += s.is_data ? 0 : 1;
    if (object_segments > opts_.max_manifest_segments) {
      co_return co_await ex.reply(common::http::swob_response_with_body(
          413, "Number of object-backed segments must be <= " +
                   std::to_string(opts_.max_manifest_segments)));
    }
    const std::string format = out_format(req).value_or("text/plain");
    const bool heartbeat =
        common::config_true_value(common::http::query_param(req.query(), "heartbeat").value_or(""));
    if (heartbeat) {
      HeaderMap h;
      h.set("Content-Type", format);
      if (!(co_await ex.start_response(202, std::move(h), std::nullopt)).ok()) co_return;
      if (!(co_await ex.write_body(" ")).ok()) co_return;
    }
    auto parts = common::http::split_path(path, 4, 4, true);
    const std::string prefix = "/" + *(*parts)[0] + "/" + *(*parts)[1] + "/";

    // HEAD each distinct segment once, `concurrency` at a time, through this middleware (a
    // nested SLO answers with its own length and etag).
    Next self = [this, &next](Exchange& e, ProxyEnv& en) { return call(e, en, next); };
    std::vector<std::string> paths;  // distinct, in manifest order
    std::map<std::string, Response> heads;
    for (const slo::InputSegment& in : *parsed) {
      if (!in.is_data && heads.try_emplace(in.path, swob_response(500)).second) {
        paths.push_back(in.path);
      }
    }
    SubrequestPile pile(co_await net::this_coro::executor);
    auto last_yield = std::chrono::steady_clock::now();
    for (size_t next_path = 0; next_path < paths.size() || pile.in_flight() > 0;) {
      while (next_path < paths.size() && pile.in_flight() < static_cast<size_t>(opts_.concurrency)) {
        std::string_view rel = paths[next_path];
        while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
        Request head = make_subrequest("HEAD", prefix + std::string(rel), "",
                                       subrequest_headers(req, "SLO"));
        pile.spawn(self, std::move(head), subrequest_env(env, "SLO"), 0, next_path++);
      }
      SubrequestPile::Done done = co_await pile.next_done();
      if (done.answer.ok()) heads[paths[done.tag]] = std::move(*done.answer);
      auto now = std::chrono::steady_clock::now();
      if (heartbeat && now - last_yield > std::chrono::seconds(opts_.yield_frequency)) {
        last_yield = now;
        if (!(co_await ex.write_body(" ")).ok()) {
          while (pile.in_flight() > 0) (void)co_await pile.next_done();
          co_return;
        }
      }
    }
    std::vector<std::optional<StoredSegment>> stored(parsed->size());
    std::vector<slo::BulkError> problems;
    int64_t total = 0;
    for (size_t i = 0; i < parsed->size(); ++i) {
      const slo::InputSegment& in = (*parsed)[i];
      if (in.is_data) {
        StoredSegment d;
        d.is_data = true;
        d.data = in.data;
        total += static_cast<int64_t>(in.data.size());
        stored[i] = std::move(d);
        continue;
      }
      SegmentCheck c = check_segment(in, heads.at(in.path), i == parsed->size() - 1, problems);
      total += c.length;
      stored[i] = std::move(c.stored);
    }
    if (env.slo_manifest_hook) {
      std::vector<ProxyEnv::SloSegment> segments;
      for (size_t i = 0; i < parsed->size(); ++i) {
        const auto& s = stored[i];
        if (s && !s->is_data) {
          segments.push_back({s->name, s->bytes, &heads.at((*parsed)[i].path).headers});
        }
      }
      for (auto& [name, message] : env.slo_manifest_hook(segments)) {
        problems.push_back({std::move(name), std::move(message)});
      }
    }
    if (!problems.empty()) {
      if (heartbeat) {
        co_return co_await finish_heartbeat(
            ex, format,
            {{"Response Status", status_line(400), false},
             {"Response Body", reason_and_explanation(400), false}},
            problems);
      }
      Response r;
      r.status = 400;
      r.headers.set("Content-Type", format);
      r.body = slo::bulk_response_body(format, {}, problems, "upload");
      co_return co_await ex.reply(std::move(r));
    }
    std::vector<StoredSegment> segments;
    segments.reserve(stored.size());
    for (auto& s : stored) segments.push_back(std::move(*s));
    const std::string etag = slo::slo_etag(segments);
    auto client_etag = req.headers.get("Etag");
    if (client_etag && !client_etag->empty() &&
        common::http::normalize_etag(*client_etag) != etag) {
      if (heartbeat) {
        co_return co_await finish_heartbeat(
            ex, format,
            {{"Response Status", status_line(422), false},
             {"Response Body", reason_and_explanation(422), false}},
            {});
      }
      co_return co_await ex.reply(swob_response(422));
    }
    co_await store_manifest(ex, env, next, segments, etag, total, heartbeat, format);
  }

  net::awaitable<void> finish_heartbeat(Exchange& ex, const std::string& format,
                                        std::vector<slo::BulkField> fields,
                                        const std::vector<slo::BulkError>& problems) {
    std::string out = "\r\n\r\n" + slo::bulk_response_body(format, std::move(fields), problems,
                                                            "upload");
    if (!(co_await ex.write_body(out)).ok()) co_return;
    (void)co_await ex.finish_response();
  }

  net::awaitable<void> store_manifest(Exchange& ex, ProxyEnv& env, const Next& next,
                                      const std::vector<StoredSegment>& segments,
                                      const std::string& etag, int64_t total, bool heartbeat,
                                      const std::string& format) {
    const Request& req = ex.request();
    const std::string json = slo::to_stored_json(segments);
    Request put = req;
    put.headers.erase("Transfer-Encoding");
    put.headers.set(kSysmetaEtag, etag);
    put.headers.set(kSysmetaSize, std::to_string(total));
    put.headers.set("X-Static-Large-Object", "True");
    const std::string manifest_etag = common::crypto::md5_hex(json);
    put.headers.set("Etag", manifest_etag);
    // Container listings show both etags; a value set by a middleware to our left is kept.
    std::string_view prior = req.headers.get_or(kOverrideEtag, "");
    size_t semi = prior.find(';');
    std::string base(prior.substr(0, semi));
    std::string rest(semi == std::string_view::npos ? "" : prior.substr(semi));
    put.headers.set(kOverrideEtag,
                    (base.empty() ? manifest_etag : base) + rest + "; slo_etag=" + etag);
    std::string ct(req.headers.get_or("Content-Type", ""));
    if (ct.empty()) ct = guess_content_type(common::http::percent_decode(req.path()));
    put.headers.set("Content-Type", ct + ";swift_bytes=" + std::to_string(total));
    put.headers.set("Content-Length", std::to_string(json.size()));
    put.content_length = json.size();
    put.chunked = false;
    put.expect_continue = false;
    StringBody source(json);
    ProxyEnv put_env = env;
    put_env.content_type_overridden = true;
    auto r = co_await run_subrequest_with_body(next, std::move(put), std::move(put_env), source,
                                               1 << 20);
    Response answer = r.ok() ? std::move(*r) : swob_response(503);
    if (is_success(answer.status)) answer.headers.set("Etag", "\"" + etag + "\"");
    if (!heartbeat) co_return co_await ex.reply(std::move(answer));
    std::vector<slo::BulkField> fields = {{"Response Status", status_line(answer.status), false}};
    if (is_success(answer.status)) {
      fields.push_back({"Etag", std::string(answer.headers.get_or("Etag", "")), false});
      fields.push_back(
          {"Last Modified", std::string(answer.headers.get_or("Last-Modified", "")), false});
    }
    fields.push_back({"Response Body", answer.body, false});
    co_await finish_heartbeat(ex, format, std::move(fields), {});
  }

  // ---- GET and HEAD ---------------------------------------------------------------------------

  net::awaitable<void> get_or_head(Exchange& ex, ProxyEnv& env, const Next& next,
                                   bool manifest_get) {
    const Request& req = ex.request();
    Request first = req;
    if (!manifest_get) {
      // The object server compares If-(None-)Match with the SLO etag when it has one, and
      // sends a manifest whole whatever the Range.
      std::string at(first.headers.get_or("X-Backend-Etag-Is-At", ""));
      first.headers.set("X-Backend-Etag-Is-At",
                        at.empty() ? std::string(kSysmetaEtag) : at + "," + std::string(kSysmetaEtag));
      std::string ign(first.headers.get_or("X-Backend-Ignore-Range-If-Metadata-Present", ""));
      first.headers.set("X-Backend-Ignore-Range-If-Metadata-Present",
                        ign.empty() ? "X-Static-Large-Object" : ign + ",X-Static-Large-Object");
    }
    ManifestCatcher catcher(ex, std::move(first));
    co_await next(catcher, env);
    if (!catcher.caught) co_return;
    if (catcher.too_big) co_return co_await ex.reply(swob_response(500));
    if (manifest_get) co_return co_await manifest_itself(ex, catcher);

    HeaderMap& h = catcher.headers;
    auto slo_etag = h.get(kSysmetaEtag);
    auto slo_size = h.get(kSysmetaSize);
    const bool conditional_headers =
        req.headers.contains("If-Match") || req.headers.contains("If-None-Match");
    const bool is_conditional =
        (catcher.status == 304 || catcher.status == 412) && conditional_headers;
    if (slo_etag && slo_size && (req.method == "HEAD" || is_conditional)) {
      Response r;
      r.status = catcher.status;
      r.headers = h;
      std::string manifest_etag(h.get_or("Etag", ""));
      r.headers.set("Etag", "\"" + std::string(*slo_etag) + "\"");
      r.headers.set("X-Manifest-Etag", manifest_etag);
      // A 304 or 412 has no body, and swob says so (Content-Length 0), as for a plain object.
      r.headers.set("Content-Length", is_conditional ? "0" : std::string(*slo_size));
      co_return co_await ex.reply(std::move(r));
    }
    int status = catcher.status;
    HeaderMap headers = std::move(catcher.headers);
    std::string body = std::move(catcher.body);
    if (need_refetch(req, status, headers, conditional_headers)) {
      std::string slo_ts(headers.get_or("X-Backend-Timestamp", "0"));
      Request get = make_subrequest("GET", common::http::percent_decode(req.path()), "",
                                    subrequest_headers(req, "SLO"));
      ManifestCatcher again(ex, std::move(get));
      ProxyEnv sub = subrequest_env(env, "SLO");
      co_await next(again, sub);
      if (!again.caught) {
        // Not a manifest any more: Swift serves a newer answer as it is (it went out), or 503.
        co_return;
      }
      if (again.too_big) co_return co_await ex.reply(swob_response(500));
      status = again.status;
      headers = std::move(again.headers);
      body = std::move(again.body);
    }
    headers.erase("Content-Range");
    co_await large_object(ex, env, next, std::move(headers), body);
  }

  static bool need_refetch(const Request& req, int status, const HeaderMap& h,
                           bool conditional_headers) {
    if (req.method == "HEAD") return true;
    if (conditional_headers && !is_success(status)) return true;
    if (req.headers.contains("Range") && (status == 206 || status == 416)) {
      unsigned long long a = 0, b = 0, len = 0;
      std::string cr(h.get_or("Content-Range", ""));
      if (std::sscanf(cr.c_str(), "bytes %llu-%llu/%llu", &a, &b, &len) != 3) return true;
      return !(a == 0 && b + 1 == len);
    }
    return false;
  }

  // ?multipart-manifest=get: the manifest itself, as stored or (format=raw) as written.
  net::awaitable<void> manifest_itself(Exchange& ex, ManifestCatcher& c) {
    const Request& req = ex.request();
    Response r;
    r.status = c.status;
    r.headers = std::move(c.headers);
    if (common::http::query_param(req.query(), "format") == "raw") {
      auto parsed = slo::parse_stored(c.body);
      std::string raw = parsed.ok() ? slo::to_raw_json(*parsed) : "[]";
      r.headers.set("Content-Length", std::to_string(raw.size()));
      r.headers.set("Etag", common::crypto::md5_hex(raw));
      r.body = req.method == "HEAD" ? "" : std::move(raw);
    } else {
      r.headers.set("Content-Type", "application/json; charset=utf-8");
      r.body = std::move(c.body);
      if (req.method == "HEAD") r.body.clear();
    }
    co_return co_await ex.reply(std::move(r));
  }

  net::awaitable<void> large_object(Exchange& ex, ProxyEnv& env, const Next& next,
                                    HeaderMap manifest_headers, const std::string& body) {
    const Request& req = ex.request();
    auto parsed = slo::parse_stored(body);
    auto segments = std::make_shared<const std::vector<StoredSegment>>(
        parsed.ok() ? std::move(*parsed) : std::vector<StoredSegment>{});
    HeaderMap h;
    std::optional<std::string> etag;
    std::optional<int64_t> length;
    for (const auto& [k, v] : manifest_headers) {
      if (iequals(k, "Etag")) {
        h.set("X-Manifest-Etag", v);
      } else if (!iequals(k, "Content-Length")) {
        h.add(k, v);
      }
      if (iequals(k, kSysmetaEtag)) etag = std::string(v);
      if (iequals(k, kSysmetaSize)) length = common::parse_python_int(v);
    }
    if (!etag) etag = slo::slo_etag(*segments);
    if (!length) length = slo::total_length(*segments);
    h.set("Content-Length", std::to_string(*length));
    h.set("Etag", "\"" + *etag + "\"");
    h.set("Accept-Ranges", "bytes");

    common::http::ResourceState state;
    state.etag = *etag;
    if (auto lm = h.get("Last-Modified")) state.last_modified = common::http::parse_http_date(*lm);
    auto cond = common::http::evaluate_conditional(req.headers, state);
    if (cond != common::http::ConditionalOutcome::kProceed) {
      Response r;
      r.status = cond == common::http::ConditionalOutcome::kNotModified ? 304 : 412;
      r.headers = std::move(h);
      r.headers.erase("Content-Length");
      co_return co_await ex.reply(std::move(r));
    }
    if (req.method == "HEAD") {
      Response r;
      r.status = 200;
      r.headers = std::move(h);
      co_return co_await ex.reply(std::move(r));
    }
    const uint64_t total = static_cast<uint64_t>(*length);
    auto decision = common::http::evaluate_range(req.headers.get("Range"), total);
    if (decision.outcome == common::http::RangeOutcome::kUnsatisfiable) {
      // swob's 416 keeps the large object's headers, its Content-Type too.
      Response r = swob_response(416);
      for (const auto& [k, v] : h) {
        if (!iequals(k, "Content-Length")) r.headers.set(k, v);
      }
      r.headers.set("Content-Range", common::http::unsatisfied_content_range(total));
      co_return co_await ex.reply(std::move(r));
    }
    std::vector<common::http::ByteRange> ranges = decision.ranges;
    const bool partial = decision.outcome == common::http::RangeOutcome::kPartial;
    if (!partial) ranges = {{0, total}};

    auto parts = common::http::split_path(common::http::percent_decode(req.path()), 3, 3, true);
    const std::string prefix = "/" + *(*parts)[0] + "/" + *(*parts)[1] + "/";
    SegmentWalker walker(next, req, env, prefix, segments, opts_);
    const std::string name(req.path());
    SegmentedBody stream(next, env, req,
                         {.name = name,
                          .agent = "SLO",
                          .source = "SLO",
                          .rate_limit_after_segment = opts_.rate_limit_after_segment,
                          .rate_limit_segments_per_sec = opts_.rate_limit_segments_per_sec,
                          .max_get_time = opts_.max_get_time},
                         walker, co_await net::this_coro::executor);
    co_await answer_body(ex, std::move(h), total, ranges, partial, walker, stream);
    co_await stream.close();
  }

  // Streams the large object's body (the ranges asked for, `partial`) after the head `h`.
  static net::awaitable<void> answer_body(Exchange& ex, HeaderMap h, uint64_t total,
                                          const std::vector<common::http::ByteRange>& ranges,
                                          bool partial, SegmentWalker& walker,
                                          SegmentedBody& body) {
    const std::string name(ex.request().path());
    // The first bytes must be there before the answer starts (Swift's 409, or 503 when a
    // segment answered with a server error).
    std::string_view first;
    if (total > 0) {
      walker.start_range(static_cast<int64_t>(ranges[0].start),
                         static_cast<int64_t>(ranges[0].end) - 1);
      auto chunk = co_await body.next_chunk();
      if (!chunk.ok()) {
        APUS_LOG_ERROR(chunk.status().message());
        const bool unavailable = chunk.status().code() == Status::Code::kUnavailable;
        co_return co_await ex.reply(swob_response(unavailable ? 503 : 409));
      }
      first = *chunk;
    }
    const std::string content_type(h.get_or("Content-Type", "application/octet-stream"));
    if (!partial || ranges.size() == 1) {
      int status = 200;
      uint64_t length = total;
      if (partial) {
        status = 206;
        length = ranges[0].size();
        h.set("Content-Range", common::http::content_range_value(ranges[0], total));
        h.set("Content-Length", std::to_string(length));
      }
      if (!(co_await ex.start_response(status, std::move(h), length)).ok()) co_return;
      if (length > 0 && !co_await send_range(ex, body, first, length, name)) co_return;
      (void)co_await ex.finish_response();
      co_return;
    }
    const std::string boundary = common::http::random_boundary();
    const uint64_t body_length =
        common::http::multipart_body_length(ranges, boundary, content_type, total);
    h.set("Content-Type", common::http::multipart_content_type(boundary));
    h.set("Content-Length", std::to_string(body_length));
    if (!(co_await ex.start_response(206, std::move(h), body_length)).ok()) co_return;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (i > 0) {
        walker.start_range(static_cast<int64_t>(ranges[i].start),
                           static_cast<int64_t>(ranges[i].end) - 1);
        body.resume();
        auto chunk = co_await body.next_chunk();
        if (!chunk.ok()) {
          APUS_LOG_ERROR(chunk.status().message());
          co_return;
        }
        first = *chunk;
      }
      std::string head =
          common::http::multipart_part_header(boundary, content_type, ranges[i], total);
      if (!(co_await ex.write_body(head)).ok()) co_return;
      if (!co_await send_range(ex, body, first, ranges[i].size(), name)) co_return;
      if (!(co_await ex.write_body("\r\n")).ok()) co_return;
    }
    if (!(co_await ex.write_body(common::http::multipart_terminator(boundary))).ok()) co_return;
    (void)co_await ex.finish_response();
  }

  // Sends `length` bytes of `body`'s current range, `first` (already taken) first; false when
  // the body had to end short (logged: the client sees a truncated body).
  static net::awaitable<bool> send_range(Exchange& ex, SegmentedBody& body, std::string_view first,
                                         uint64_t length, const std::string& name) {
    uint64_t sent = 0;
    std::string_view chunk = first;
    while (!chunk.empty()) {
      if (sent + chunk.size() > length) {
        (void)co_await ex.write_body(chunk.substr(0, length - sent));
        APUS_LOG_ERROR("While processing manifest " + name + ": too many bytes; truncating");
        co_return false;
      }
      if (!(co_await ex.write_body(chunk)).ok()) co_return false;
      sent += chunk.size();
      auto next = co_await body.next_chunk();
      if (!next.ok()) {
        APUS_LOG_ERROR(next.status().message() + "; closing connection");
        co_return false;
      }
      chunk = *next;
    }
    if (sent != length) {
      APUS_LOG_ERROR("While processing manifest " + name + ": expected another " +
                     std::to_string(length - sent) + " bytes; closing connection");
      co_return false;
    }
    co_return true;
  }

  // ---- DELETE ?multipart-manifest=delete ----------------------------------------------------

  struct DeleteItem {
    std::string name;  // "/container/object"
    bool sub_slo = false;
    std::optional<std::pair<int, std::string>> error;  // code, message
    std::string version_id;  // the top manifest's ?version-id, if any
  };

  // Swift's get_slo_segments(): the segments of the manifest `name`, or the error that names
  // why not (code and message, as the bulk answer reports them).
  net::awaitable<std::variant<std::vector<StoredSegment>, std::pair<int, std::string>>>
  manifest_segments(const std::string& prefix, const std::string& name, const Request& req,
                    const ProxyEnv& env, const Next& next,
                    const std::string& version_query = {}) const {
    using Out = std::variant<std::vector<StoredSegment>, std::pair<int, std::string>>;
    std::string_view rel = name;
    while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
    Request get = make_subrequest("GET", prefix + std::string(rel),
                                  "multipart-manifest=get" + version_query,
                                  subrequest_headers(req, "SLO"));
    auto sub = co_await Subrequest::start(next, std::move(get), subrequest_env(env, "SLO"));
    const int status = sub->status();
    if (is_success(status)) {
      if (!is_slo(sub->headers())) {
        co_await sub->close();
        co_return Out(std::make_pair(400, std::string("Not an SLO manifest")));
      }
      auto body = co_await sub->read_all(kMaxStoredManifest);
      co_await sub->close();
      auto parsed = body.ok() ? slo::parse_stored(*body)
                              : Result<std::vector<StoredSegment>>(body.status());
      if (!parsed.ok()) co_return Out(std::make_pair(500, std::string("Unable to load SLO manifest")));
      co_return Out(std::move(*parsed));
    }
    co_await sub->close();
    if (status == 404) co_return Out(std::make_pair(404, std::string("SLO manifest not found")));
    if (status == 401) co_return Out(std::make_pair(401, std::string("401 Unauthorized")));
    co_return Out(std::make_pair(500, std::string("Unable to load SLO manifest or segment.")));
  }

  // Swift's get_segments_to_delete_iter(): the manifest's segments, then the manifest, each
  // nested manifest expanded when its turn comes (its segments queued, itself after them).
  class SegmentsToDelete final : public BulkDeleteSource {
   public:
    SegmentsToDelete(const Slo& slo, const Request& req, const ProxyEnv& env, const Next& next)
        : slo_(slo), req_(req), env_(env), next_(next) {}

    net::awaitable<common::http::OrRefusal<std::optional<BulkDeleteItem>>> next() override {
      if (!started_) {
        started_ = true;
        const std::string path = common::http::percent_decode(req_.path());
        if (!common::check_utf8(path)) {
          co_return common::http::swob_response_with_body(412, "Invalid UTF8 or contains NULL");
        }
        auto parts = common::http::split_path(path, 4, 4, true);
        prefix_ = "/" + *(*parts)[0] + "/" + *(*parts)[1] + "/";
        queue_.push_back({"/" + *(*parts)[2] + "/" + *(*parts)[3], true, std::nullopt, {}});
        // Object versioning: ?version-id= names a version of the top manifest (Swift's).
        if (auto v = common::http::query_param(req_.query(), "version-id")) {
          queue_.back().version_id = *v;
        }
      }
      while (!queue_.empty()) {
        // A bound on what nested manifests can make this hold (Swift's: ten times
        // max_manifest_segments, in case an operator lowered that since the upload).
        if (queue_.size() > static_cast<size_t>(slo_.opts_.max_manifest_segments) * 10) {
          co_return common::http::swob_response_with_body(
              400, "Too many buffered slo segments to delete.");
        }
        DeleteItem item = std::move(queue_.front());
        queue_.pop_front();
        if (item.sub_slo) {
          const std::string version_query =
              item.version_id.empty() ? ""
                                      : "&version-id=" + common::http::quote(item.version_id, "");
          auto segs = co_await slo_.manifest_segments(prefix_, item.name, req_, env_, next_,
                                                      version_query);
          if (auto* list = std::get_if<std::vector<StoredSegment>>(&segs)) {
            for (auto& seg : *list) {
              if (!seg.is_data) queue_.push_back({seg.name, seg.sub_slo, std::nullopt, {}});
            }
          } else {
            item.error = std::get<std::pair<int, std::string>>(segs);
          }
          item.sub_slo = false;
          queue_.push_back(std::move(item));
          continue;
        }
        BulkDeleteItem out{std::move(item.name), 0, {}, std::move(item.version_id)};
        if (item.error) {
          out.error_status = item.error->first;
          out.error_message = std::move(item.error->second);
        }
        co_return std::optional<BulkDeleteItem>(std::move(out));
      }
      co_return std::optional<BulkDeleteItem>();
    }

   private:
    const Slo& slo_;
    const Request& req_;
    const ProxyEnv& env_;
    const Next& next_;
    bool started_ = false;
    std::string prefix_;  // "/v1/<account>/"
    std::deque<DeleteItem> queue_;
  };

  // Deletes the segments, then the manifest, through bulk's delete engine as Swift's SLO does
  // (its answer, its concurrency: delete_concurrency).
  net::awaitable<void> delete_manifest(Exchange& ex, ProxyEnv& env, const Next& next) {
    SegmentsToDelete names(*this, ex.request(), env, next);
    BulkDeleteOptions options;
    options.max_deletes_per_request = std::numeric_limits<int64_t>::max();
    options.delete_concurrency = opts_.delete_concurrency;
    co_await answer_bulk_delete(ex, env, next, options, /*max_path_length=*/0, &names,
                                out_format(ex.request()), {"MultipartDELETE", "SLO"});
  }

  // ---- DELETE ?multipart-manifest=delete&async=yes (allow_async_delete) ----------------------

  // Swift's handle_async_delete(): the segments (all in one container, none a large object)
  // become rows of the expirer's queue, which deletes them later without condition, and the
  // manifest is deleted now.
  net::awaitable<void> async_delete(Exchange& ex, ProxyEnv& env, const Next& next) {
    const Request& req = ex.request();
    const std::string path = common::http::percent_decode(req.path());
    if (!common::check_utf8(path)) {
      co_return co_await ex.reply(
          common::http::swob_response_with_body(412, "Invalid UTF8 or contains NULL"));
    }
    auto parts = common::http::split_path(path, 4, 4, true);
    const std::string &version = *(*parts)[0], &account = *(*parts)[1];
    const std::string &container = *(*parts)[2], &object = *(*parts)[3];
    const std::string prefix = "/" + version + "/" + account + "/";
    auto listed = co_await manifest_segments(prefix, "/" + container + "/" + object, req, env, next);
    if (auto* error = std::get_if<std::pair<int, std::string>>(&listed)) {
      co_return co_await ex.reply(
          common::http::swob_response_with_body(error->first, error->second));
    }
    std::set<std::string> containers;
    std::vector<std::string> objects;
    bool nested = false;
    for (const StoredSegment& s : std::get<std::vector<StoredSegment>>(listed)) {
      if (s.is_data) continue;
      auto names = common::http::split_path(s.name, 2, 2, true);
      if (!names.ok()) co_return co_await ex.reply(swob_response(500));
      containers.insert(*(*names)[0]);
      objects.push_back(*(*names)[1]);
      nested = nested || s.sub_slo;
    }
    // Only data: deleting the manifest is all there is to do.
    if (objects.empty()) co_return co_await next(ex, env);
    if (containers.size() > 1) {
      std::string found;
      for (const auto& c : containers) {
        found += (found.empty() ? "\"" : ", \"") + common::http::quote(c) + "\"";
      }
      co_return co_await ex.reply(common::http::swob_response_with_body(
          400, "All segments must be in one container. Found segments in " + found));
    }
    if (nested) {
      co_return co_await ex.reply(
          common::http::swob_response_with_body(400, "No segments may be large objects."));
    }
    // The client must be allowed to write in the manifest's and the segments' containers.
    const std::string& segment_container = *containers.begin();
    std::vector<std::string> written = {container};
    if (segment_container != container) written.push_back(segment_container);
    if (env.authorize) {
      for (const std::string& c : written) {
        CachedInfo info = co_await info_.container_info(account, c, req, env);
        std::optional<std::string> acl;
        if (auto v = info.headers.get("X-Container-Write")) acl = std::string(*v);
        env.acl = acl;
        auto denied = co_await env.authorize(req, env);
        env.acl.reset();
        if (denied) co_return co_await ex.reply(std::move(*denied));
      }
    }
    const common::Timestamp ts = common::Timestamp::now();
    boost::json::array rows;
    for (const std::string& o : objects) {
      rows.push_back({{"name", ts.normal() + "-" + account + "/" + segment_container + "/" + o},
                      {"deleted", 0},
                      {"created_at", ts.internal()},
                      {"etag", "d41d8cd98f00b204e9800998ecf8427e"},
                      {"size", 0},
                      {"storage_policy_index", 0},
                      {"content_type", std::string(common::kAsyncDeleteType)}});
    }
    auto hash = common::hash_path_hex({swift_.hash_path_prefix, swift_.hash_path_suffix}, account,
                                      container, object);
    if (!hash.ok()) co_return co_await ex.reply(swob_response(500));
    const std::string queue = common::expirer_container_name(
        common::clamp_delete_at(static_cast<int64_t>(ts.seconds())),
        opts_.expiring_objects_container_divisor, *hash);
    HeaderMap h;
    h.set("Content-Type", "application/json");
    h.set("X-Backend-Storage-Policy-Index", "0");
    h.set("X-Backend-Allow-Private-Methods", "True");
    Request update =
        make_subrequest("UPDATE", "/v1/" + opts_.expiring_objects_account + "/" + queue, "", h);
    const std::string body = boost::json::serialize(rows);
    update.content_length = body.size();
    StringBody source(body);
    auto queued = co_await run_subrequest_with_body(next, std::move(update),
                                                    pre_authed_env(env, "SLO"), source, 1 << 16);
    if (!queued.ok() || !is_success(queued->status)) {
      APUS_LOG_ERROR("Failed to enqueue expiration entries: " +
                     (queued.ok() ? status_line(queued->status) + "\n" + queued->body
                                  : queued.status().to_string()));
      co_return co_await ex.reply(swob_response(503));
    }
    co_await next(ex, env);
  }

  // ---- container listings ---------------------------------------------------------------------

  // A JSON container listing: each object whose hash carries "; slo_etag=<etag>" gets it as
  // slo_etag instead, as Swift's SLO rewrites listings.
  net::awaitable<void> container_listing(Exchange& ex, ProxyEnv& env, const Next& next) {
    Request req = ex.request();
    auto sub = co_await Subrequest::start(next, req, env);
    const HeaderMap& h = sub->headers();
    std::string_view ct = h.get_or("Content-Type", "");
    auto len = sub->length();
    bool rewrite = is_success(sub->status()) &&
                   ct.substr(0, ct.find(';')) == "application/json" && len &&
                   *len <= kMaxListingLength;
    Response r;
    r.status = sub->status();
    r.headers = h;
    if (!rewrite) {
      if (!(co_await ex.start_response(r.status, std::move(r.headers), len)).ok()) {
        co_await sub->close();
        co_return;
      }
      std::array<char, kChunk> buf;
      for (;;) {
        auto n = co_await sub->read(buf);
        if (!n.ok() || *n == 0) break;
        if (!(co_await ex.write_body(std::string_view(buf.data(), *n))).ok()) break;
      }
      co_await sub->close();
      if (ex.response_started()) (void)co_await ex.finish_response();
      co_return;
    }
    auto body = co_await sub->read_all(kMaxListingLength);
    co_await sub->close();
    if (!body.ok()) co_return co_await ex.reply(swob_response(500));
    r.body = rewrite_listing(*body);
    r.headers.erase("Content-Length");
    co_return co_await ex.reply(std::move(r));
  }

  static std::string rewrite_listing(const std::string& text) {
    boost::system::error_code ec;
    boost::json::value doc = boost::json::parse(text, ec);
    if (ec || !doc.is_array()) return text;
    bool changed = false;
    for (auto& item : doc.get_array()) {
      if (!item.is_object()) continue;
      auto& o = item.get_object();
      if (o.contains("subdir")) continue;
      auto* hash = o.if_contains("hash");
      if (!hash || !hash->is_string()) continue;
      std::string_view hv(hash->get_string().data(), hash->get_string().size());
      size_t semi = hv.find(';');
      if (semi == std::string_view::npos) continue;
      std::string etag(hv.substr(0, semi));
      while (!etag.empty() && etag.back() == ' ') etag.pop_back();
      std::string rest, slo_etag;
      bool found = false;
      std::string_view params = hv.substr(semi);
      while (!params.empty()) {
        params.remove_prefix(1);  // ';'
        size_t next_semi = params.find(';');
        std::string_view p = params.substr(0, next_semi);
        params = next_semi == std::string_view::npos ? std::string_view() : params.substr(next_semi);
        while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
        while (!p.empty() && p.back() == ' ') p.remove_suffix(1);
        size_t eq = p.find('=');
        std::string key(p.substr(0, eq));
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value(eq == std::string_view::npos ? "" : p.substr(eq + 1));
        if (key == "slo_etag") {
          slo_etag = value;
          found = true;
        } else {
          rest += "; " + key + "=" + value;
        }
      }
      if (!found) continue;
      o["hash"] = etag + rest;
      o["slo_etag"] = "\"" + slo_etag + "\"";
      changed = true;
    }
    if (!changed) return text;
    std::string out;
    common::listing::append_python_json(out, doc);
    return out;
  }

  Options opts_;
  const common::SwiftConf& swift_;
  InfoLookup& info_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_slo(const common::Section& section,
                                             const MiddlewareContext& context) {
  Options o;
  APUS_ASSIGN_OR_RETURN(o.max_manifest_segments,
                        section.get_int("max_manifest_segments", o.max_manifest_segments));
  APUS_ASSIGN_OR_RETURN(o.max_manifest_size,
                        section.get_int("max_manifest_size", o.max_manifest_size));
  APUS_ASSIGN_OR_RETURN(o.yield_frequency, section.get_int("yield_frequency", o.yield_frequency));
  o.allow_async_delete =
      common::config_true_value(section.get_string("allow_async_delete", "false"));
  APUS_ASSIGN_OR_RETURN(o.max_get_time, section.get_int("max_get_time", o.max_get_time));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_under_size,
                        section.get_int("rate_limit_under_size", o.rate_limit_under_size));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_after_segment,
                        section.get_int("rate_limit_after_segment", o.rate_limit_after_segment));
  APUS_ASSIGN_OR_RETURN(o.rate_limit_segments_per_sec,
                        section.get_int("rate_limit_segments_per_sec",
                                        o.rate_limit_segments_per_sec));
  // Swift's bounds: 0..1000 HEADs (Apus runs at least one), 1..1000 DELETEs.
  int64_t concurrency = 2;
  APUS_ASSIGN_OR_RETURN(concurrency, section.get_int("concurrency", concurrency));
  o.concurrency = static_cast<int>(std::clamp<int64_t>(concurrency, 1, 1000));
  int64_t delete_concurrency = 0;
  APUS_ASSIGN_OR_RETURN(delete_concurrency, section.get_int("delete_concurrency", concurrency));
  o.delete_concurrency = static_cast<int>(std::clamp<int64_t>(delete_concurrency, 1, 1000));
  // Swift's expirer settings as SLO reads them: the filter's (or [DEFAULT]'s) own, else the
  // defaults, with swift.conf's auto_create_account_prefix.
  const std::string auto_prefix = section.get_string(
      "auto_create_account_prefix", context.swift.constraints.auto_create_account_prefix);
  o.expiring_objects_account =
      auto_prefix + section.get_string("expiring_objects_account_name", "expiring_objects");
  APUS_ASSIGN_OR_RETURN(o.expiring_objects_container_divisor,
                        section.get_int("expiring_objects_container_divisor",
                                        o.expiring_objects_container_divisor));
  if (o.expiring_objects_container_divisor <= 0) {
    return Status::invalid_argument("expiring_objects_container_divisor in [" + section.name() +
                                    "] must be a positive integer");
  }
  return std::unique_ptr<Middleware>(std::make_unique<Slo>(o, context.swift, context.info));
}

}  // namespace apus::proxy
