// dlo without sockets: the pure parts (X-Object-Manifest checks, listing parsing, the etag,
// which bytes of which segment a range needs, the segment rate limit), then the middleware
// against an in-memory "rest of the pipeline" that stores objects and lists containers the way
// the proxy app answers them.
#include "proxy/dlo.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <map>
#include <string>

#include "common/crypto/md5.h"
#include "common/http/range.h"
#include "common/http/url.h"
#include "proxy/pipeline.h"
#include "proxy/segmented_body.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using dlo::SegmentCursor;

// ---- the pure parts ----------------------------------------------------------------------------

std::optional<Response> check(std::string_view value) {
  HeaderMap h;
  h.set("X-Object-Manifest", value);
  return dlo::check_manifest_header(h);
}

TEST_CASE("dlo: a PUT's X-Object-Manifest must be container/prefix") {
  HeaderMap none;
  CHECK_FALSE(dlo::check_manifest_header(none));
  CHECK_FALSE(check("c/p"));
  CHECK_FALSE(check("c/p/q"));
  CHECK_FALSE(check("c/%2Fp"));  // checked before decoding, as Swift does
  for (const char* bad : {"c", "/p", "c/", "c//p", "c/p?x", "c/p&x", "c?/p", ""}) {
    auto r = check(bad);
    REQUIRE_MESSAGE(r, bad);
    CHECK(r->status == 400);
    CHECK(r->body == "X-Object-Manifest must be in the format container/prefix");
  }
}

TEST_CASE("dlo: the manifest value splits at its first slash") {
  CHECK(dlo::split_manifest("c/a/b") == std::make_pair(std::string("c"), std::string("a/b")));
  CHECK(dlo::split_manifest("c/") == std::make_pair(std::string("c"), std::string()));
  CHECK_FALSE(dlo::split_manifest("c"));
}

TEST_CASE("dlo: listings parse, skipping subdirs, and refuse what is not a listing") {
  auto l = dlo::parse_listing(
      R"([{"name":"a","bytes":3,"hash":"x","last_modified":"t"},{"subdir":"d/"},)"
      R"({"name":"b\u00e9","bytes":0,"hash":"y"}])");
  REQUIRE(l.ok());
  REQUIRE(l->size() == 2);
  CHECK((*l)[0].name == "a");
  CHECK((*l)[0].bytes == 3);
  CHECK((*l)[1].name == "b\xc3\xa9");
  CHECK((*l)[1].hash == "y");
  for (const char* bad : {"", "{}", "[1]", R"([{"name":"a"}])", R"([{"name":"a","bytes":-1,"hash":"x"}])",
                          "[{\"name\":\"a\",\"bytes\":1,\"hash\":2}]", "not json"}) {
    CHECK_MESSAGE(!dlo::parse_listing(bad).ok(), bad);
  }
}

TEST_CASE("dlo: the etag is the quoted md5 of the segment etags, quotes removed") {
  std::vector<dlo::Segment> segs = {{"a", 1, "\"0123\""}, {"b", 2, "4567"}};
  CHECK(dlo::etag_of(segs) == "\"" + common::crypto::md5_hex("01234567") + "\"");
  CHECK(dlo::etag_of({}) == "\"d41d8cd98f00b204e9800998ecf8427e\"");
}

// The pieces a cursor asks for over segments of these sizes, as "i:range" strings.
std::vector<std::string> walk(SegmentCursor c, std::vector<uint64_t> sizes) {
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SegmentCursor::Piece p;
    auto step = c.next(sizes[i], &p);
    if (step == SegmentCursor::Step::kDone) break;
    if (step == SegmentCursor::Step::kFetch) {
      out.push_back(std::to_string(i) + ":" + p.range_header() + "/" +
                    std::to_string(p.size(sizes[i])));
    }
  }
  return out;
}

TEST_CASE("dlo: a whole GET asks every segment whole, skipping empty ones in front") {
  using V = std::vector<std::string>;
  CHECK(walk(SegmentCursor(std::nullopt, std::nullopt), {10, 10, 10}) ==
        V{"0:/10", "1:/10", "2:/10"});
  // Swift skips empty segments until the first byte, then asks even empty ones.
  CHECK(walk(SegmentCursor(std::nullopt, std::nullopt), {0, 0, 5, 0, 5}) ==
        V{"2:/5", "3:/0", "4:/5"});
}

TEST_CASE("dlo: a range asks only the segments it covers, and only their part") {
  using V = std::vector<std::string>;
  // Bytes 8..32 of five 10-byte segments (test_dlo.py's test_get_range).
  CHECK(walk(SegmentCursor(8, 32), {10, 10, 10, 10, 10}) ==
        V{"0:bytes=8-/2", "1:/10", "2:/10", "3:bytes=0-2/3"});
  CHECK(walk(SegmentCursor(47, 47), {10, 10, 10, 10, 10}) == V{"4:bytes=7-7/1"});
  CHECK(walk(SegmentCursor(10, 19), {10, 10, 10}) == V{"1:/10"});
  CHECK(walk(SegmentCursor(0, 0), {10, 10}) == V{"0:bytes=0-0/1"});
  SegmentCursor c(0, 9);
  SegmentCursor::Piece p;
  CHECK(c.next(10, &p) == SegmentCursor::Step::kFetch);
  CHECK(c.done());
  CHECK(c.next(10, &p) == SegmentCursor::Step::kDone);
}

TEST_CASE("dlo: segments are rate limited after the first rate_limit_after_segment") {
  SegmentRateLimiter l(2, 1);
  CHECK(l.wait_before_next(100.0) == 0);
  CHECK(l.wait_before_next(100.0) == 0);
  CHECK(l.wait_before_next(100.0) == 0);  // the first limited one goes at once
  CHECK(l.wait_before_next(100.0) == doctest::Approx(1.0));
  CHECK(l.wait_before_next(100.0) == doctest::Approx(2.0));
  CHECK(l.wait_before_next(110.0) == 0);  // after a pause longer than the 5 s buffer
  SegmentRateLimiter unlimited(0, 0);
  for (int i = 0; i < 5; ++i) CHECK(unlimited.wait_before_next(1.0) == 0);
}

TEST_CASE("dlo: options have Swift's names and defaults") {
  auto conf = common::Config::parse("[filter:dlo]\nmax_get_time = 5\n");
  REQUIRE(conf.ok());
  auto o = dlo::parse_options(conf->section("filter:dlo"));
  REQUIRE(o.ok());
  CHECK(o->max_get_time == 5);
  CHECK(o->rate_limit_after_segment == 10);
  CHECK(o->rate_limit_segments_per_sec == 1);
  auto bad = common::Config::parse("[filter:dlo]\nrate_limit_after_segment = x\n");
  REQUIRE(bad.ok());
  CHECK_FALSE(dlo::parse_options(bad->section("filter:dlo")).ok());
}

TEST_CASE("dlo: a dlo section without its settings takes them from the proxy app's section") {
  auto conf = common::Config::parse(
      "[app:proxy-server]\nmax_get_time = 7\nrate_limit_segments_per_sec = 3\n"
      "[filter:dlo]\nuse = egg:swift#dlo\n"
      "[filter:dlo2]\nrate_limit_after_segment = 4\n");
  REQUIRE(conf.ok());
  const common::Section app = conf->section("app:proxy-server");
  auto o = dlo::parse_options(conf->section("filter:dlo"), &app);
  REQUIRE(o.ok());
  CHECK(o->max_get_time == 7);
  CHECK(o->rate_limit_segments_per_sec == 3);
  CHECK(o->rate_limit_after_segment == 10);
  // One setting of its own: the app's are not looked at (Swift's rule is all or nothing).
  auto own = dlo::parse_options(conf->section("filter:dlo2"), &app);
  REQUIRE(own.ok());
  CHECK(own->rate_limit_after_segment == 4);
  CHECK(own->max_get_time == 86400);
  CHECK(own->rate_limit_segments_per_sec == 1);
}

// ---- the middleware ----------------------------------------------------------------------------

// The client's side: the answer, streamed or whole.
class ClientExchange final : public common::http::Exchange {
 public:
  explicit ClientExchange(Request req) : req_(std::move(req)) {}
  const Request& request() const override { return req_; }
  net::awaitable<Result<size_t>> read_body(std::span<char>) override { co_return size_t{0}; }
  net::awaitable<Status> send_continue() override { co_return Status(); }
  net::awaitable<Status> write_body(std::string_view chunk) override {
    body.append(chunk);
    co_return Status();
  }
  net::awaitable<Status> finish_response() override {
    finished = true;
    co_return Status();
  }
  bool response_started() const override { return status != 0; }
  int response_status() const override { return status; }

  int status = 0;
  HeaderMap headers;
  std::optional<uint64_t> length;
  std::string body;
  bool finished = false;

 protected:
  net::awaitable<Status> do_respond(Response r) override {
    status = r.status;
    headers = std::move(r.headers);
    body = req_.method == "HEAD" ? "" : r.body;
    length = r.body.size();
    finished = true;
    co_return Status();
  }
  net::awaitable<Status> do_start_response(int st, HeaderMap h,
                                           std::optional<uint64_t> len) override {
    status = st;
    headers = std::move(h);
    length = len;
    co_return Status();
  }

 private:
  Request req_;
};

struct Stored {
  std::string body;
  HeaderMap meta;  // X-Object-Manifest and the like
};

// The rest of the pipeline: objects of account AUTH_a in memory, answered as the proxy app
// answers (object GET/HEAD with Range and conditionals, container listings in JSON pages of
// `limit`). `hook` runs before each object GET (to change the store mid-request).
struct Store {
  std::map<std::string, Stored> objects;  // "c/o" -> object
  int64_t limit = 10000;
  std::vector<std::string> requests;  // "METHOD target" of every request seen
  std::function<void(const std::string& key)> hook;
  size_t chunk = 3;  // bytes per body write: small, for many writes
  const std::string* client_body = nullptr;  // what the client has received so far
  std::map<std::string, size_t> client_had;  // object -> client bytes when its GET came

  void put(const std::string& key, std::string body, HeaderMap meta = {}) {
    objects[key] = Stored{std::move(body), std::move(meta)};
  }

  net::awaitable<void> serve(common::http::Exchange& ex) {
    const Request& req = ex.request();
    requests.push_back(req.method + " " + req.target);
    std::string path = common::http::percent_decode(req.path());
    auto segs = common::http::split_path(path, 3, 4, true);
    REQUIRE(segs.ok());
    if (!(*segs)[3]) co_return co_await list(ex, *(*segs)[2]);
    std::string key = *(*segs)[2] + "/" + *(*segs)[3];
    if (client_body) client_had[key] = client_body->size();
    if (hook) hook(key);
    auto it = objects.find(key);
    if (it == objects.end()) {
      Response r;
      r.status = 404;
      r.body = "<html><h1>Not Found</h1></html>";
      co_return co_await ex.reply(std::move(r));
    }
    const Stored& o = it->second;
    HeaderMap h = o.meta;
    const std::string etag = common::crypto::md5_hex(o.body);
    h.set("Etag", etag);
    h.set("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT");
    h.set("Content-Type", "application/octet-stream");
    auto cond = common::http::evaluate_conditional(req.headers, {.etag = etag,
                                                                 .last_modified = 1767225600});
    if (cond != common::http::ConditionalOutcome::kProceed) {
      Response r;
      r.status = cond == common::http::ConditionalOutcome::kNotModified ? 304 : 412;
      r.headers = h;
      co_return co_await ex.reply(std::move(r));
    }
    std::optional<std::string_view> range = req.headers.get("Range");
    std::string ignore(req.headers.get_or("X-Backend-Ignore-Range-If-Metadata-Present", ""));
    if (!ignore.empty() && o.meta.contains(ignore)) range.reset();
    auto d = common::http::evaluate_range(req.method == "HEAD" ? std::nullopt : range,
                                          o.body.size());
    if (d.outcome == common::http::RangeOutcome::kUnsatisfiable) {
      Response r;
      r.status = 416;
      r.headers = h;
      co_return co_await ex.reply(std::move(r));
    }
    std::string body = o.body;
    int status = 200;
    if (d.outcome == common::http::RangeOutcome::kPartial) {
      REQUIRE(d.ranges.size() == 1);
      status = 206;
      body = body.substr(d.ranges[0].start, d.ranges[0].size());
      h.set("Content-Range", common::http::content_range_value(d.ranges[0], o.body.size()));
    }
    h.set("Content-Length", std::to_string(body.size()));
    if (req.method == "HEAD") {
      Response r;
      r.status = status;
      r.headers = h;
      co_return co_await ex.reply(std::move(r));
    }
    if (!(co_await ex.start_response(status, h, body.size())).ok()) co_return;
    for (size_t at = 0; at < body.size(); at += chunk) {
      if (!(co_await ex.write_body(std::string_view(body).substr(at, chunk))).ok()) co_return;
    }
    (void)co_await ex.finish_response();
  }

  net::awaitable<void> list(common::http::Exchange& ex, const std::string& container) {
    const Request& req = ex.request();
    std::string prefix = common::http::query_param(req.query(), "prefix").value_or("");
    std::string marker = common::http::query_param(req.query(), "marker").value_or("");
    CHECK(common::http::query_param(req.query(), "format") == "json");
    std::string json = "[";
    int64_t n = 0;
    for (const auto& [key, o] : objects) {
      if (!key.starts_with(container + "/")) continue;
      std::string name = key.substr(container.size() + 1);
      if (!name.starts_with(prefix) || name <= marker || n == limit) continue;
      json += (n++ ? "," : "") + std::string("{\"name\":\"") + name + "\",\"bytes\":" +
              std::to_string(o.body.size()) + ",\"hash\":\"" + common::crypto::md5_hex(o.body) +
              "\"}";
    }
    Response r;
    r.headers.set("Content-Type", "application/json; charset=utf-8");
    r.body = json + "]";
    co_return co_await ex.reply(std::move(r));
  }
};

struct NoInfo final : public InfoLookup {
  net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                          const ProxyEnv&) override {
    co_return CachedInfo{200, {}, {}};
  }
  net::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                            const Request&, const ProxyEnv&) override {
    co_return CachedInfo{200, {}, {}};
  }
  net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

struct Fixture {
  common::SwiftConf swift;
  std::string swift_dir = "/nonexistent";
  NoInfo info;
  Store store;
  std::string options = "rate_limit_segments_per_sec = 0\n";

  Fixture() {
    HeaderMap man;
    man.set("X-Object-Manifest", "c/seg_");
    for (char l : std::string("abcde")) store.put(std::string("c/seg_") + l, std::string(10, l));
    store.put("c/man", "man-contents", man);
    store.put("c/plain", "plain contents");
  }

  ClientExchange run(std::string method, std::string target, HeaderMap headers = {}) {
    auto conf = common::Config::parse("[filter:dlo]\n" + options);
    REQUIRE(conf.ok());
    swift.constraints.container_listing_limit = store.limit;
    auto mw = make_dlo(conf->section("filter:dlo"), MiddlewareContext{swift, swift_dir, info});
    REQUIRE(mw.ok());
    Request req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.headers = std::move(headers);
    ClientExchange ex(std::move(req));
    store.client_body = &ex.body;
    ProxyEnv env;
    Next next = [this](common::http::Exchange& e, ProxyEnv&) { return store.serve(e); };
    net::io_context ioc;
    auto done = net::co_spawn(ioc, (*mw)->call(ex, env, next), net::use_future);
    ioc.run();
    done.get();
    store.client_body = nullptr;
    return ex;
  }
};

const std::string kAll = "aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee";

std::string all_etag() {
  std::string etags;
  for (char l : std::string("abcde")) etags += common::crypto::md5_hex(std::string(10, l));
  return "\"" + common::crypto::md5_hex(etags) + "\"";
}

HeaderMap with(std::string_view name, std::string_view value) {
  HeaderMap h;
  h.set(name, value);
  return h;
}

TEST_CASE_FIXTURE(Fixture, "dlo: GET of a manifest streams its segments, with etag and length") {
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK(ex.body == kAll);
  CHECK(ex.finished);
  CHECK(ex.length == 50);
  CHECK(ex.headers.get_or("Etag", "") == all_etag());
  CHECK(ex.headers.get_or("X-Object-Manifest", "") == "c/seg_");
  // Segments are read with ?multipart-manifest=get; the manifest GET told the object server
  // to ignore a Range for a manifest.
  CHECK(store.requests.back() == "GET /v1/AUTH_a/c/seg_e?multipart-manifest=get");
}

TEST_CASE_FIXTURE(Fixture, "dlo: HEAD answers the large object's etag and length") {
  auto ex = run("HEAD", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK(ex.headers.get_or("Content-Length", "") == "50");
  CHECK(ex.headers.get_or("Etag", "") == all_etag());
  CHECK(store.requests.size() == 2);  // the manifest and the listing, no segment
}

TEST_CASE_FIXTURE(Fixture, "dlo: plain objects and multipart-manifest=get pass through") {
  auto plain = run("GET", "/v1/AUTH_a/c/plain");
  CHECK(plain.status == 200);
  CHECK(plain.body == "plain contents");
  auto manifest = run("GET", "/v1/AUTH_a/c/man?multipart-manifest=get");
  CHECK(manifest.body == "man-contents");
  CHECK(manifest.headers.get_or("Etag", "") == common::crypto::md5_hex("man-contents"));
}

TEST_CASE_FIXTURE(Fixture, "dlo: one range gives a 206 across segment boundaries") {
  auto ex = run("GET", "/v1/AUTH_a/c/man", with("Range", "bytes=8-32"));
  CHECK(ex.status == 206);
  CHECK(ex.body == "aabbbbbbbbbbccccccccccddd");
  CHECK(ex.headers.get_or("Content-Range", "") == "bytes 8-32/50");
  CHECK(ex.length == 25);
  auto last = run("GET", "/v1/AUTH_a/c/man", with("Range", "bytes=-3"));
  CHECK(last.status == 206);
  CHECK(last.body == "eee");
}

TEST_CASE_FIXTURE(Fixture, "dlo: several ranges give the whole object, 200") {
  auto ex = run("GET", "/v1/AUTH_a/c/man", with("Range", "bytes=0-4,10-14"));
  CHECK(ex.status == 200);
  CHECK(ex.body == kAll);
}

TEST_CASE_FIXTURE(Fixture, "dlo: a range past the end is a 416 naming the length") {
  auto ex = run("GET", "/v1/AUTH_a/c/man", with("Range", "bytes=50-56"));
  CHECK(ex.status == 416);
  CHECK(ex.headers.get_or("Content-Range", "") == "bytes */50");
}

TEST_CASE_FIXTURE(Fixture, "dlo: If-Match and If-None-Match compare the large object's etag") {
  CHECK(run("GET", "/v1/AUTH_a/c/man", with("If-Match", all_etag())).status == 200);
  CHECK(run("GET", "/v1/AUTH_a/c/man", with("If-Match", "\"nope\"")).status == 412);
  CHECK(run("HEAD", "/v1/AUTH_a/c/man", with("If-Match", "\"nope\"")).status == 412);
  auto nm = run("GET", "/v1/AUTH_a/c/man", with("If-None-Match", all_etag()));
  CHECK(nm.status == 304);
  CHECK(nm.body.empty());
  CHECK(run("HEAD", "/v1/AUTH_a/c/man", with("If-None-Match", all_etag())).status == 304);
  CHECK(run("GET", "/v1/AUTH_a/c/man", with("If-Modified-Since",
                                            "Fri, 02 Jan 2026 00:00:00 GMT")).status == 304);
}

TEST_CASE_FIXTURE(Fixture, "dlo: a missing first segment is a 409, a missing later one cuts the body") {
  // Listed, but gone when fetched.
  store.hook = [this](const std::string& key) {
    if (key == "c/seg_a") store.objects.erase("c/seg_a");
  };
  CHECK(run("GET", "/v1/AUTH_a/c/man").status == 409);
  store.put("c/seg_a", std::string(10, 'a'));
  store.hook = [this](const std::string& key) {
    if (key == "c/seg_c") store.objects.erase("c/seg_c");
  };
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK_FALSE(ex.finished);
  CHECK(ex.body == kAll.substr(0, 20));
}

TEST_CASE_FIXTURE(Fixture, "dlo: a segment that changed size mid-GET ends the body, no wrong bytes") {
  store.hook = [this](const std::string& key) {
    if (key == "c/seg_b") store.put("c/seg_b", std::string(12, 'B'));
  };
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK_FALSE(ex.finished);
  CHECK(ex.body == kAll.substr(0, 10));
}

TEST_CASE_FIXTURE(Fixture, "dlo: listings are paged with a marker") {
  store.limit = 2;
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK(ex.body == kAll);
  CHECK(ex.finished);
  // Without a complete first page there is no length and the manifest's own etag stays.
  CHECK_FALSE(ex.length);
  CHECK(ex.headers.get_or("Etag", "") == common::crypto::md5_hex("man-contents"));
  int listings = 0;
  for (const auto& r : store.requests) listings += r.find("format=json") != std::string::npos;
  CHECK(listings == 3);
  // A HEAD announces no length rather than 0.
  auto head = run("HEAD", "/v1/AUTH_a/c/man");
  CHECK(head.status == 200);
  CHECK_FALSE(head.length);
  CHECK_FALSE(head.headers.contains("Content-Length"));
}

TEST_CASE_FIXTURE(Fixture, "dlo: a manifest whose container holds no segments is an empty object") {
  HeaderMap man;
  man.set("X-Object-Manifest", "other/seg_");
  store.put("c/man2", "", man);
  // The store lists an unknown container as empty: the large object is empty.
  auto ex = run("GET", "/v1/AUTH_a/c/man2");
  CHECK(ex.status == 200);
  CHECK(ex.body.empty());
  CHECK(ex.headers.get_or("Etag", "") == "\"d41d8cd98f00b204e9800998ecf8427e\"");
}

TEST_CASE_FIXTURE(Fixture, "dlo: a PUT with a bad X-Object-Manifest is refused") {
  auto ex = run("PUT", "/v1/AUTH_a/c/m", with("X-Object-Manifest", "c"));
  CHECK(ex.status == 400);
  CHECK(ex.body == "X-Object-Manifest must be in the format container/prefix");
}

TEST_CASE_FIXTURE(Fixture, "dlo: the next segment's GET starts before the current one is sent") {
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.body == kAll);
  // Without prefetching, seg_b would be asked for once all of seg_a had gone to the client.
  CHECK(store.client_had["c/seg_b"] < 10);
  CHECK(store.client_had["c/seg_e"] < 40);
}

TEST_CASE_FIXTURE(Fixture, "dlo: big segments are prefetched late, with bounded buffers") {
  constexpr size_t kSeg = 4 << 20;
  store.objects.clear();
  store.chunk = 64 << 10;
  HeaderMap man;
  man.set("X-Object-Manifest", "c/big_");
  store.put("c/big_1", std::string(kSeg, '1'));
  store.put("c/big_2", std::string(kSeg, '2'));
  store.put("c/man", "", man);
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.body == std::string(kSeg, '1') + std::string(kSeg, '2'));
  // big_2 is asked for once less than the 1 MiB read-ahead of big_1 is still to come (so at
  // most that, plus what is buffered, is left to send): never two whole segments in memory.
  size_t had = store.client_had["c/big_2"];
  CHECK(had < kSeg);
  CHECK(had + (2 << 20) + (256 << 10) >= kSeg);
}

TEST_CASE_FIXTURE(Fixture, "dlo: max_get_time cuts the body off") {
  // The third segment waits a second for the rate limit, and then the time is up: Swift checks
  // before each segment's GET.
  options = "max_get_time = 1\nrate_limit_after_segment = 1\nrate_limit_segments_per_sec = 1\n";
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  CHECK(ex.status == 200);
  CHECK(ex.length == 50);
  CHECK(ex.body.size() >= 10);
  CHECK(ex.body.size() <= 20);
  CHECK(ex.body == kAll.substr(0, ex.body.size()));
  CHECK_FALSE(ex.finished);
}

TEST_CASE_FIXTURE(Fixture, "dlo: segments after rate_limit_after_segment are rate limited") {
  options = "rate_limit_after_segment = 1\nrate_limit_segments_per_sec = 20\n";
  auto start = std::chrono::steady_clock::now();
  auto ex = run("GET", "/v1/AUTH_a/c/man");
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(ex.body == kAll);
  // Segments 2 to 5 go at 20 a second: the 2nd at once, the 5th 0.15 s after it.
  CHECK(took >= 0.14);
}

}  // namespace
}  // namespace apus::proxy
