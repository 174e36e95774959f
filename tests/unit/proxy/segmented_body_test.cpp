// SegmentedBody without sockets: a scripted list of pieces, and a fake app holding the segment
// objects (whose stored etag can be made to lie), checked for the bytes handed over, where a
// bad segment stops the body, and what the segment GETs asked for.
#include "proxy/segmented_body.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_future.hpp>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/crypto/md5.h"
#include "common/http/headers.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

struct Object {
  std::string body;
  std::string etag;  // what the server says; empty: the body's md5
  int status = 200;
};

// How the fake object server answers a whole read asked to be verified (kVerifiedReadHeader):
// as Swift's (the header ignored), or as Apus's (the promise made, and a bad body cut short
// before its last write).
enum class Server { kSwift, kApus };

// Segment objects by decoded path, answered with Range support, 7 bytes per write.
struct Segments {
  std::map<std::string, Object> objects;
  std::vector<std::string> seen;  // "<path> <Range>" of each GET
  Server server = Server::kSwift;
  std::vector<std::string> verified_asked;  // paths whose GET asked for a verified read

  Next app() {
    return [this](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
      const Request& req = ex.request();
      const std::string path = common::http::percent_decode(req.path());
      seen.push_back(path + " " + std::string(req.headers.get_or("Range", "")));
      CHECK(req.query() == "multipart-manifest=get");
      auto it = objects.find(path);
      if (it == objects.end()) co_return co_await ex.reply(common::http::swob_response(404));
      const Object& o = it->second;
      if (o.status != 200) co_return co_await ex.reply(common::http::swob_response(o.status));
      HeaderMap h;
      h.set("Etag", o.etag.empty() ? common::crypto::md5_hex(o.body) : o.etag);
      std::string body = o.body;
      int status = 200;
      auto d = common::http::evaluate_range(req.headers.get("Range"), o.body.size());
      if (d.outcome == common::http::RangeOutcome::kPartial) {
        status = 206;
        body = body.substr(d.ranges[0].start, d.ranges[0].size());
      }
      const bool asked = req.headers.contains(common::http::kVerifiedReadHeader);
      if (asked) verified_asked.push_back(path);
      const bool verified = asked && server == Server::kApus && status == 200;
      if (verified) h.set(common::http::kVerifiedReadHeader, "yes");
      const bool bad = common::crypto::md5_hex(o.body) != h.get_or("Etag", "");
      if (!(co_await ex.start_response(status, std::move(h), body.size())).ok()) co_return;
      for (size_t at = 0; at < body.size(); at += 7) {
        if (verified && bad && at + 7 >= body.size()) co_return;  // the last write held back
        if (!(co_await ex.write_body(std::string_view(body).substr(at, 7))).ok()) co_return;
      }
      (void)co_await ex.finish_response();
    };
  }
};

class Pieces final : public PieceSource {
 public:
  explicit Pieces(std::deque<BodyPiece> pieces) : pieces_(std::move(pieces)) {}
  void add(BodyPiece p) { pieces_.push_back(std::move(p)); }
  net::awaitable<Result<std::optional<BodyPiece>>> next() override {
    if (pieces_.empty()) co_return std::optional<BodyPiece>();
    BodyPiece p = std::move(pieces_.front());
    pieces_.pop_front();
    co_return std::optional<BodyPiece>(std::move(p));
  }

 private:
  std::deque<BodyPiece> pieces_;
};

BodyPiece segment(std::string path, uint64_t expected, std::string range = "",
                  std::string etag = "") {
  BodyPiece p;
  p.path = std::move(path);
  p.expected = expected;
  p.range = std::move(range);
  p.etag = std::move(etag);
  return p;
}

BodyPiece data(std::string bytes) {
  BodyPiece p;
  p.is_data = true;
  p.expected = bytes.size();
  p.data = std::move(bytes);
  return p;
}

// Everything the body gives, and how it ended.
struct Drained {
  std::string bytes;
  Status end;
};

net::awaitable<Drained> drain(SegmentedBody& body) {
  Drained d;
  for (;;) {
    auto chunk = co_await body.next_chunk();
    if (!chunk.ok()) {
      d.end = chunk.status();
      break;
    }
    if (chunk->empty()) break;
    d.bytes.append(*chunk);
  }
  co_return d;
}

SegmentedOptions options() {
  SegmentedOptions o;
  o.name = "/v1/a/c/manifest";
  o.agent = "SLO";
  o.source = "SLO";
  return o;
}

// The whole body of `pieces` from the segments of `s`, with default options.
Drained read_all(Segments& s, PieceSource& pieces) {
  Drained d;
  run([&]() -> net::awaitable<void> {
    const Next app = s.app();
    const ProxyEnv env;
    const Request client;
    SegmentedBody body(app, env, client, options(), pieces, co_await net::this_coro::executor);
    d = co_await drain(body);
    co_await body.close();
  });
  return d;
}

TEST_CASE("segmented body: data, whole segments and ranges, in order") {
  Segments s;
  s.objects["/v1/a/c/s1"] = {"0123456789abcdefghij", "", 200};
  s.objects["/v1/a/c/s2"] = {"ABCDEFGHIJ", "", 200};
  Pieces pieces({data("<data>"), segment("/v1/a/c/s1", 20, "", common::crypto::md5_hex("0123456789abcdefghij")),
                 segment("/v1/a/c/s2", 4, "bytes=3-6"), data("</data>")});
  Drained d = read_all(s, pieces);
  CHECK(d.end.ok());
  CHECK(d.bytes == "<data>0123456789abcdefghijDEFG</data>");
  CHECK(s.seen == std::vector<std::string>{"/v1/a/c/s1 ", "/v1/a/c/s2 bytes=3-6"});
}

TEST_CASE("segmented body: a segment whose bytes do not match its etag is never given whole") {
  Segments s;
  const std::string good = "the good bytes, forty of them exactly...";
  s.objects["/v1/a/c/s1"] = {"first segment", "", 200};
  s.objects["/v1/a/c/s2"] = {"rotten bytes, forty of them exactly.....", common::crypto::md5_hex(good), 200};
  Pieces pieces({segment("/v1/a/c/s1", 13), segment("/v1/a/c/s2", 40)});
  Drained d = read_all(s, pieces);
  CHECK(d.end.code() == Status::Code::kConflict);
  CHECK(d.end.message().find("Bad MD5 checksum for /v1/a/c/s2") != std::string::npos);
  // The first segment whole, and of the rotten one everything but the chunk held back.
  CHECK(d.bytes.starts_with("first segment"));
  CHECK(d.bytes.size() < 13 + 40);
}

TEST_CASE("segmented body: whole segments are asked for a verified read, ranges are not") {
  Segments s;
  s.objects["/v1/a/c/s1"] = {"0123456789", "", 200};
  s.objects["/v1/a/c/s2"] = {"ABCDEFGHIJ", "", 200};
  Pieces pieces({segment("/v1/a/c/s1", 10), segment("/v1/a/c/s2", 4, "bytes=3-6")});
  Drained d = read_all(s, pieces);
  CHECK(d.end.ok());
  CHECK(d.bytes == "0123456789DEFG");
  CHECK(s.verified_asked == std::vector<std::string>{"/v1/a/c/s1"});
}

TEST_CASE("segmented body: a bad segment from a verifying server ends short, never whole") {
  Segments s;
  s.server = Server::kApus;
  const std::string good = "the good bytes, forty of them exactly...";
  s.objects["/v1/a/c/s1"] = {"first segment", "", 200};
  s.objects["/v1/a/c/s2"] = {"rotten bytes, forty of them exactly.....", common::crypto::md5_hex(good), 200};
  Pieces pieces({segment("/v1/a/c/s1", 13), segment("/v1/a/c/s2", 40)});
  Drained d = read_all(s, pieces);
  // The server's promise stands in for hashing here: the cut body is what fails it.
  CHECK(d.end.code() == Status::Code::kConflict);
  INFO(d.end.message());
  CHECK(d.end.message().find("/v1/a/c/s2") != std::string::npos);
  CHECK(d.end.message().find("Bad MD5") == std::string::npos);
  CHECK(d.bytes.starts_with("first segment"));
  CHECK(d.bytes.size() < 13 + 40);
}

TEST_CASE("segmented body: a segment replaced since the manifest was written fails before its bytes") {
  Segments s;
  s.objects["/v1/a/c/s1"] = {"new bytes", "", 200};
  Pieces pieces({segment("/v1/a/c/s1", 9, "", common::crypto::md5_hex("old bytes"))});
  Drained d = read_all(s, pieces);
  CHECK(d.end.code() == Status::Code::kConflict);
  CHECK(d.end.message().find("Object segment no longer valid") != std::string::npos);
  CHECK(d.bytes.empty());
}

TEST_CASE("segmented body: a missing segment is a Conflict, a server error Unavailable") {
  for (int status : {404, 503}) {
    Segments s;
    s.objects["/v1/a/c/s1"] = {"x", "", status};
    Pieces pieces({segment("/v1/a/c/s1", 1)});
    Drained d;
    run([&]() -> net::awaitable<void> {
      const Next app = s.app();
      const ProxyEnv env;
      const Request client;
      SegmentedBody body(app, env, client, options(), pieces, co_await net::this_coro::executor);
      d = co_await drain(body);
      co_await body.close();
    });
    CHECK(d.end.code() == (status == 404 ? Status::Code::kConflict : Status::Code::kUnavailable));
    CHECK(d.end.message().find("got " + std::to_string(status)) != std::string::npos);
  }
}

TEST_CASE("segmented body: a length other than the piece's is refused at the head") {
  Segments s;
  s.objects["/v1/a/c/s1"] = {"twelve bytes", "", 200};
  Pieces pieces({segment("/v1/a/c/s1", 10)});
  Drained d = read_all(s, pieces);
  CHECK(d.end.code() == Status::Code::kConflict);
  CHECK(d.bytes.empty());
}

TEST_CASE("segmented body: resume() goes on after the source's end (the next byte range)") {
  Segments s;
  s.objects["/v1/a/c/s1"] = {"0123456789", "", 200};
  Pieces pieces({segment("/v1/a/c/s1", 2, "bytes=0-1")});
  std::string first, second;
  run([&]() -> net::awaitable<void> {
    const Next app = s.app();
    const ProxyEnv env;
    const Request client;
    SegmentedBody body(app, env, client, options(), pieces, co_await net::this_coro::executor);
    first = (co_await drain(body)).bytes;
    pieces.add(segment("/v1/a/c/s1", 3, "bytes=7-"));
    body.resume();
    second = (co_await drain(body)).bytes;
    co_await body.close();
  });
  CHECK(first == "01");
  CHECK(second == "789");
}

TEST_CASE("segment rate limiter: the first `after` go at once, then `per_second`") {
  SegmentRateLimiter l(2, 1);
  CHECK(l.wait_before_next(100.0) == 0);
  CHECK(l.wait_before_next(100.0) == 0);
  CHECK(l.wait_before_next(100.0) == 0);  // the first limited one goes at once
  CHECK(l.wait_before_next(100.0) == doctest::Approx(1.0));
}

}  // namespace
}  // namespace apus::proxy
