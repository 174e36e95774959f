// formpost (proxy/formpost.h) and its multipart reader (proxy/multipart.h). The parser's
// expected answers are those of Swift 2.30.1's iter_multipart_mime_documents() and
// parse_mime_headers() on the same bytes (run with Python 3.11).
#include "proxy/formpost.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <algorithm>
#include <chrono>
#include <map>

#include <doctest/doctest.h>

#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/digest.h"
#include "proxy/multipart.h"
#include "proxy/subrequest.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
using multipart::Parser;
using Step = Parser::Step;

struct Part {
  std::vector<std::pair<std::string, std::string>> headers;  // the ones asked for
  std::string data;
};

// Runs the parser over `body` fed `chunk` bytes at a time. "invalid" / "too long" for those
// answers, else one line per part: "<header values>|<data>".
std::string parse(std::string_view body, std::string_view boundary = "XX", size_t chunk = 1) {
  Parser p(boundary);
  size_t at = 0;
  auto more = [&]() {
    if (at == body.size()) {
      p.finish();
      return;
    }
    size_t n = std::min({chunk, body.size() - at, p.room()});
    REQUIRE(n > 0);
    p.feed(body.substr(at, n));
    at += n;
  };
  Step s;
  while ((s = p.start()) == Step::kNeedMore) more();
  if (s == Step::kInvalid) return "invalid";
  std::string out;
  while (true) {
    std::vector<std::string> lines;
    while ((s = p.read_headers(&lines)) == Step::kNeedMore) more();
    if (s == Step::kTooLong) return out + "too long";
    multipart::MimeHeaders h = multipart::MimeHeaders::parse(lines);
    for (const char* name : {"A", "B", "C", "D", "Content-Disposition"}) {
      if (auto v = h.get(name)) out += std::string(name) + "=" + *v + ";";
    }
    out += "|";
    while (true) {
      std::string_view data;
      s = p.read_data(3, &data);
      if (s == Step::kNeedMore) {
        more();
        continue;
      }
      CHECK(p.buffered() <= multipart::kBufferCapacity + 16);
      if (s == Step::kEnd) break;
      REQUIRE(s == Step::kReady);
      CHECK(!data.empty());
      out += data;
    }
    out += "\n";
    if (!p.more_parts()) break;
  }
  return out;
}

TEST_CASE("multipart: parts, headers and data as Swift reads them") {
  struct Case {
    std::string_view body, want;
  };
  const Case cases[] = {
      {"--XX\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue\r\n--XX--\r\n",
       "Content-Disposition=form-data; name=\"a\";|value\n"},
      // Blank lines before the first boundary; a part whose data is a blank line's start.
      {"\r\n\r\n--XX\r\nA: 1\r\n\r\nbody\r\n--XX\r\nB: 2\r\n\r\n\r\n--XX--", "A=1;|body\nB=2;|\n"},
      // The first line is read up to the boundary's length + 2 and stripped.
      {"--XX  \r\nA: 1\r\n\r\nbody", "|A: 1\r\n\r\nbody\n"},
      {" --XX\r\nA: 1\r\n\r\nbody\r\n--XX--", "|body\n"},
      {"--XY\r\nA: 1\r\n\r\nbody", "invalid"},
      {"\n--XX\r\n", "invalid"},
      {"", "invalid"},
      // The first value of a name; a delimiter followed by anything starts a part.
      {"--XX\r\nA: 1\r\nA: 2\r\na: 3\r\n\r\nx\r\n--XXjunk\r\nC: 1\r\n\r\ny", "A=1;|x\n|y\n"},
      // Folded lines keep their breaks; a bare '\n' ends a header line for the email parser.
      {"--XX\r\nA: 1\r\n  folded\r\n\tmore\r\nB:2\r\n\r\nx\r\n--XX--",
       "A=1\r\n  folded\r\n\tmore;B=2;|x\n"},
      {"--XX\r\nA: 1\nB: 2\r\n\r\nx\r\n--XX--", "A=1;B=2;|x\n"},
      // A line that is no header ends the headers.
      {"--XX\r\ngarbage\r\nC: 3\r\n\r\nx\r\n--XX--", "|x\n"},
      {"--XX\r\nA : 1\r\n\r\nx", "|x\n"},
      // The delimiter ends a part in its headers.
      {"--XX\r\nA: 1\r\n--XX\r\nB: 2\r\n\r\ny\r\n--XX--", "A=1;|\nB=2;|y\n"},
      // Latin-1 (not UTF-8) bytes in a name end the headers; UTF-8 values are kept.
      {"--XX\r\n\xe9: \xe9\r\nC: \xc3\xa9\r\n\r\nx\r\n--XX--", "|x\n"},
      {"--XX\r\nC: \xc3\xa9\r\nD: \xe9\r\n\r\nx\r\n--XX--", "C=\xc3\xa9;D=\xc3\xa9;|x\n"},
      // A header without a name is dropped with its continuation; "From " lines are skipped.
      {"--XX\r\n: x\r\n cont\r\nD: 4\r\n\r\nx\r\n--XX--", "D=4;|x\n"},
      {"--XX\r\nFrom x\r\nA: 1\r\nFrom y\r\nB: 2\r\n\r\nx\r\n--XX--", "A=1;B=2;|x\n"},
      // No closing "--": one more, empty part.
      {"--XX\r\nA: 1\r\n\r\nx\r\n--XX", "A=1;|x\n|\n"},
      {"--XX\r\nA: 1\r\n\r\nx\r\n--XX-", "A=1;|x\n|\n"},
      {"--XX\r\n\r\n--XX\r\n\r\n\r\n--XX--", "|\n|\n"},
      // The input's end ends the form; a near-delimiter is data.
      {"--XX\r\nA: 1\r\n\r\nx\r\n--X", "A=1;|x\r\n--X\n"},
      {"--XX\r\nA: 1\r\n\r\nx\r\n-", "A=1;|x\r\n-\n"},
      {"--XX\r\nA: 1", "A=1;|\n"},
  };
  for (const Case& c : cases) {
    for (size_t chunk : {1, 2, 5, 7, 4096}) {
      CHECK_MESSAGE(parse(c.body, "XX", chunk) == c.want,
                    "body " << c.body << " chunk " << chunk);
    }
  }
  // The fuzzer's find: data handed out from the buffer's first byte, the buffer then empty,
  // lost that byte (the buffer was cleared under the caller's view).
  const std::string_view found =
      "--abcdefgh\r\n\r-\n\n\x04" "BOUND---\rabcdefg\r\n--abcdEfgh-\r\n--abcdeBOUND\r\n"
      "Content-Disposition: formfgh---data; name=\"redirect\"\r\n\r\nhtt";
  for (size_t chunk : {1, 7, 4096}) {
    CHECK_MESSAGE(parse(found, "abcdefgh", chunk) == "|htt\n", "chunk " << chunk);
  }
}

TEST_CASE("multipart: memory stays bounded") {
  // One header line that never ends: refused once it passes kMaxHeaderBytes.
  std::string body = "--XX\r\nA: " + std::string(multipart::kMaxHeaderBytes + 10, 'a');
  CHECK(parse(body, "XX", 4096) == "too long");
  // Many short header lines add up too.
  body = "--XX\r\n";
  for (int i = 0; i < 20000; ++i) body += "A: 1\r\n";
  CHECK(parse(body, "XX", 65536) == "too long");
  // A large body streams through a bounded buffer, whatever the chunk size.
  body = "--XX\r\nA: 1\r\n\r\n" + std::string(1 << 20, 'z') + "\r\n--XX--";
  Parser p("XX");
  size_t at = 0, data = 0;
  Step s;
  while ((s = p.start()) == Step::kNeedMore) {
    size_t n = std::min(p.room(), body.size() - at);
    p.feed(std::string_view(body).substr(at, n));
    at += n;
  }
  std::vector<std::string> lines;
  while ((s = p.read_headers(&lines)) == Step::kNeedMore) {
    size_t n = std::min(p.room(), body.size() - at);
    p.feed(std::string_view(body).substr(at, n));
    at += n;
  }
  while (true) {
    std::string_view d;
    s = p.read_data(65536, &d);
    CHECK(p.buffered() <= multipart::kBufferCapacity + 16);
    if (s == Step::kEnd) break;
    if (s == Step::kReady) {
      data += d.size();
      continue;
    }
    size_t n = std::min(p.room(), body.size() - at);
    if (n == 0) {
      p.finish();
    } else {
      p.feed(std::string_view(body).substr(at, n));
      at += n;
    }
  }
  CHECK(data == (1u << 20));
  CHECK(!p.more_parts());
}

TEST_CASE("multipart: Content-Disposition as Swift's parse_content_disposition") {
  auto d = multipart::parse_content_disposition("form-data; name=\"a\"; filename=\"b.txt\"");
  CHECK(d.type == "form-data");
  CHECK(d.attrs["name"] == "a");
  CHECK(d.attrs["filename"] == "b.txt");
  // Answers of Swift 2.30.1.
  d = multipart::parse_content_disposition("form-data; name=\"a\" ; filename=\"b.txt\"");
  CHECK(d.attrs.size() == 1);
  CHECK(d.attrs["name"] == "a\" ; filename=\"b.txt");
  d = multipart::parse_content_disposition("form-data; name=a;filename=b");
  CHECK(d.attrs["filename"] == "b");
  CHECK(multipart::parse_content_disposition("form-data ").type == "form-data ");
  CHECK(multipart::parse_content_disposition("form-data;name=\"x\";").attrs["name"] == "x");
  d = multipart::parse_content_disposition("a; b=\"c;d\"; e=f");
  CHECK(d.attrs["b"] == "c;d");
  CHECK(d.attrs["e"] == "f");
  CHECK(multipart::parse_content_disposition("a; b=\"c\"x\"; e=f").attrs["b"] == "c\"x");
  CHECK(multipart::parse_content_disposition("a; b=c d").attrs["b"] == "c d");
  CHECK(multipart::parse_content_disposition("a; b=\"q\n\"; c=d").attrs.empty());
  CHECK(multipart::parse_content_disposition("x; name=\"\"").attrs.at("name").empty());
  d = multipart::parse_content_disposition("multipart/form-data; boundary=----abc");
  CHECK(d.type == "multipart/form-data");
  CHECK(d.attrs["boundary"] == "----abc");
}

TEST_CASE("multipart: UTF-8 as Python's strict decoder") {
  CHECK(multipart::valid_utf8("plain"));
  CHECK(multipart::valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  CHECK(!multipart::valid_utf8("\xe9"));
  CHECK(!multipart::valid_utf8("\xc3"));
  CHECK(!multipart::valid_utf8("\xed\xa0\x80"));  // a surrogate
  CHECK(!multipart::valid_utf8("\xc0\xaf"));      // overlong
  CHECK(!multipart::valid_utf8("\xf4\x90\x80\x80"));
  CHECK(multipart::latin1_to_utf8("a\xe9") == "a\xc3\xa9");
}

// ---- the middleware on a fake app ------------------------------------------------------------

template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

struct Keys : InfoLookup {
  HeaderMap account, container;
  net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                          const ProxyEnv&) override {
    co_return CachedInfo{204, account, {}};
  }
  net::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                            const Request&, const ProxyEnv&) override {
    co_return CachedInfo{204, container, {}};
  }
  net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

// A body from a string, handed out a few bytes at a time.
struct StringBody : BodySource {
  std::string data;
  size_t at = 0;
  net::awaitable<common::Result<size_t>> read(std::span<char> buf) override {
    size_t n = std::min({buf.size(), data.size() - at, size_t{1000}});
    std::copy_n(data.data() + at, n, buf.data());
    at += n;
    co_return n;
  }
};

struct Stored {
  HeaderMap headers;
  std::string body;
};

struct Fixture {
  Keys keys;
  std::unique_ptr<Middleware> mw;
  std::map<std::string, Stored> objects;  // by decoded path
  std::vector<Request> passed;            // requests formpost let through
  int put_status = 201;
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();

  Fixture() {
    keys.container.set("X-Container-Meta-Temp-Url-Key", "secret");
    auto parsed = common::Config::parse("[filter:formpost]\nuse = egg:swift#formpost\n");
    common::SwiftConf swift;
    std::string dir = "/nonexistent";
    auto made =
        make_formpost(parsed->section("filter:formpost"), MiddlewareContext{swift, dir, keys});
    REQUIRE(made.ok());
    mw = std::move(made.value());
  }

  // Stores PUT bodies; a body that fails (max_file_size) stores nothing, as the proxy.
  Next app() {
    return [this](Exchange& ex, ProxyEnv& env) -> net::awaitable<void> {
      const Request& req = ex.request();
      if (req.method != "PUT") {
        passed.push_back(req);
        co_return co_await ex.reply(common::http::swob_response(204));
      }
      CHECK(env.authorize_override);
      CHECK(env.remote_user == ".wsgi.pre_authed");
      CHECK(env.source == "FP");
      CHECK(req.chunked);
      std::string body;
      std::vector<char> buf(4096);
      while (true) {
        auto n = co_await ex.read_body(buf);
        if (!n.ok()) co_return co_await ex.reply(common::http::swob_response(499));
        if (*n == 0) break;
        body.append(buf.data(), *n);
      }
      if (put_status >= 300) co_return co_await ex.reply(common::http::swob_response(put_status));
      objects[common::http::percent_decode(req.path())] = Stored{req.headers, body};
      Response r = common::http::swob_response(put_status);
      r.headers.set("Access-Control-Allow-Origin", "*");
      r.headers.set("Etag", "e");
      co_return co_await ex.reply(std::move(r));
    };
  }

  Response post(std::string path, std::string body, std::string boundary = "BOUND") {
    Next next = app();
    Next through = [this, &next](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, next); };
    HeaderMap h;
    h.set("Content-Type", "multipart/form-data; boundary=" + boundary);
    h.set("User-Agent", "test");
    Request req = make_subrequest("POST", path, "", std::move(h));
    req.content_length = body.size();
    StringBody source;
    source.data = std::move(body);
    std::optional<common::Result<Response>> r;
    run([&]() -> net::awaitable<void> {
      r.emplace(co_await run_subrequest_with_body(through, std::move(req), ProxyEnv{}, source,
                                                  1 << 20));
    });
    REQUIRE(r->ok());
    return std::move(**r);
  }

  std::string signature(std::string_view path, std::string_view redirect, std::string_view size,
                        std::string_view count, std::string_view expires,
                        std::string_view key = "secret") {
    return digest::hmac_hex("sha256", key,
                            std::string(path) + "\n" + std::string(redirect) + "\n" +
                                std::string(size) + "\n" + std::string(count) + "\n" +
                                std::string(expires));
  }

  static std::string field(std::string_view name, std::string_view value) {
    return "--BOUND\r\nContent-Disposition: form-data; name=\"" + std::string(name) +
           "\"\r\n\r\n" + std::string(value) + "\r\n";
  }
  static std::string file(std::string_view name, std::string_view filename,
                          std::string_view data, std::string_view type = "") {
    std::string out = "--BOUND\r\nContent-Disposition: form-data; name=\"" + std::string(name) +
                      "\"; filename=\"" + std::string(filename) + "\"\r\n";
    if (!type.empty()) out += "Content-Type: " + std::string(type) + "\r\n";
    return out + "\r\n" + std::string(data) + "\r\n";
  }

  // A signed form for `path` with its fields, then `files`, then the closing boundary.
  std::string form(std::string_view path, std::string_view redirect, std::string_view size,
                   std::string_view count, std::string files, std::string extra = "") {
    std::string expires = std::to_string(now + 600);
    std::string out;
    if (!redirect.empty()) out += field("redirect", redirect);
    out += field("max_file_size", size) + field("max_file_count", count) +
           field("expires", expires) +
           field("signature", signature(path, redirect, size, count, expires)) + extra;
    return out + files + "--BOUND--\r\n";
  }
};

TEST_CASE_FIXTURE(Fixture, "formpost: signed files become PUTs below the path") {
  Response r = post("/v1/AUTH_a/c/pre_",
                    form("/v1/AUTH_a/c/pre_", "", "100", "3",
                         file("f1", "one.txt", "first file", "text/x-one") +
                             file("f2", "two.bin", std::string(100, 'x')),
                         field("x_delete_after", " 0600 ")));
  CHECK(r.status == 201);
  CHECK(r.body == "201 Created");
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  CHECK(r.headers.get_or("Access-Control-Allow-Origin", "") == "*");
  CHECK(!r.headers.contains("Etag"));
  REQUIRE(objects.size() == 2);
  CHECK(objects["/v1/AUTH_a/c/pre_one.txt"].body == "first file");
  CHECK(objects["/v1/AUTH_a/c/pre_one.txt"].headers.get_or("Content-Type", "") == "text/x-one");
  CHECK(objects["/v1/AUTH_a/c/pre_one.txt"].headers.get_or("X-Delete-After", "") == "600");
  CHECK(objects["/v1/AUTH_a/c/pre_one.txt"].headers.get_or("User-Agent", "") == "test FormPost");
  CHECK(objects["/v1/AUTH_a/c/pre_two.bin"].body == std::string(100, 'x'));
  CHECK(!objects["/v1/AUTH_a/c/pre_two.bin"].headers.contains("Content-Type"));
  // A container path gets a '/' before the file name.
  r = post("/v1/AUTH_a/c", form("/v1/AUTH_a/c", "", "100", "1", file("f", "x y", "z")));
  CHECK(r.status == 201);
  CHECK(objects.contains("/v1/AUTH_a/c/x y"));
}

TEST_CASE_FIXTURE(Fixture, "formpost: redirect with status and message") {
  Response r = post("/v1/AUTH_a/c/", form("/v1/AUTH_a/c/", "http://h/done?x=1", "10", "1",
                                          file("f", "a", "data")));
  CHECK(r.status == 303);
  CHECK(r.headers.get_or("Location", "") == "http://h/done?x=1&status=201&message=");
  CHECK(r.body ==
        "<html><body><p><a href=\"http://h/done?x=1&status=201&message=\">Click to "
        "continue...</a></p></body></html>");
  CHECK(!r.headers.contains("Content-Type"));
  r = post("/v1/AUTH_a/c/", form("/v1/AUTH_a/c/", "http://h/done", "10", "1",
                                 file("f", "a", "data") + file("g", "b", "more")));
  CHECK(r.status == 303);
  CHECK(r.headers.get_or("Location", "") ==
        "http://h/done?status=400&message=max%20file%20count%20exceeded");
  CHECK(objects.size() == 1);
}

TEST_CASE_FIXTURE(Fixture, "formpost: limits, expiry, signature and bad fields") {
  const std::string p = "/v1/AUTH_a/c/";
  // Over max_file_size: 400 and nothing stored (even with a redirect).
  Response r = post(p, form(p, "http://h/", "3", "1", file("f", "big", "four")));
  CHECK(r.status == 400);
  CHECK(r.body == "FormPost: max_file_size exceeded");
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  CHECK(objects.empty());
  r = post(p, form(p, "", "4", "1", file("f", "exact", "four")));
  CHECK(r.status == 201);
  r = post(p, form(p, "", "4", "0", file("f", "exact", "four")));
  CHECK(r.status == 400);
  CHECK(r.body == "400 Bad Request\r\nFormPost: Max File Count Exceeded");
  // No file at all.
  r = post(p, form(p, "", "4", "1", ""));
  CHECK(r.status == 400);
  CHECK(r.body == "400 Bad Request\r\nFormPost: No Files To Process");
  // Wrong key, expired, not integers.
  keys.container.set("X-Container-Meta-Temp-Url-Key", "other");
  r = post(p, form(p, "", "4", "1", file("f", "x", "1")));
  CHECK(r.status == 401);
  CHECK(r.body == "FormPost: Invalid Signature");
  CHECK(r.headers.get_or("Www-Authenticate", "") == "Swift realm=\"unknown\"");
  CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  keys.container.set("X-Container-Meta-Temp-Url-Key", "secret");
  now -= 3600;
  r = post(p, form(p, "", "4", "1", file("f", "x", "1")));
  CHECK(r.status == 401);
  CHECK(r.body == "FormPost: Form Expired");
  now += 3600;
  r = post(p, form(p, "", "big", "1", file("f", "x", "1")));
  CHECK(r.status == 400);
  CHECK(r.body == "FormPost: max_file_size not an integer");
  r = post(p, form(p, "", "4", "one", file("f", "x", "1")));
  CHECK(r.body == "FormPost: max_file_count not an integer");
  r = post(p, form(p, "", "4", "1", file("f", "x", "1"), field("x_delete_at", "soon")));
  CHECK(r.body == "FormPost: x_delete_at not an integer: Unix timestamp required.");
  r = post(p, form(p, "", "4", "1", file("f", "x", "1"), field("x_delete_after", "")));
  CHECK(r.body == "FormPost: x_delete_after not an integer: Number of seconds required.");
  // Another path than the signed one.
  r = post("/v1/AUTH_a/c/other", form(p, "", "4", "1", file("f", "x", "1")));
  CHECK(r.status == 401);
  // A field that is not UTF-8: Swift fails with a 500.
  r = post(p, "--BOUND\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n\xff\r\n--BOUND--");
  CHECK(r.status == 500);
  // A failed PUT: its status line.
  put_status = 404;
  r = post(p, form(p, "", "4", "1", file("f", "x", "1")));
  CHECK(r.status == 404);
  CHECK(r.body == "404 Not Found");
  CHECK(objects.size() == 1);
}

TEST_CASE_FIXTURE(Fixture, "formpost: what is not a form passes; a bad first boundary is 400") {
  Response r = post("/v1/AUTH_a/c/", "--OTHER\r\n\r\n", "BOUND");
  CHECK(r.status == 400);
  CHECK(r.body == "FormPost: invalid starting boundary");
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  // Another content type, or no boundary: the app's POST.
  Next next = app();
  Next through = [this, &next](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, next); };
  for (std::string_view type : {"multipart/form-data", "Multipart/Form-Data; boundary=x",
                                "text/plain"}) {
    HeaderMap h;
    h.set("Content-Type", type);
    Request req = make_subrequest("POST", "/v1/AUTH_a/c/o", "", std::move(h));
    std::optional<common::Result<Response>> got;
    run([&]() -> net::awaitable<void> {
      got.emplace(co_await run_subrequest(through, std::move(req), ProxyEnv{}, 1 << 20));
    });
    REQUIRE(got->ok());
    CHECK((*got)->status == 204);
  }
  CHECK(passed.size() == 3);
  // A header block past the limit.
  r = post("/v1/AUTH_a/c/", "--BOUND\r\nA: " + std::string(multipart::kMaxHeaderBytes, 'a'));
  CHECK(r.status == 400);
}

TEST_CASE("formpost: /info") {
  auto parsed = common::Config::parse("[filter:formpost]\nuse = egg:swift#formpost\n");
  common::SwiftConf swift;
  std::string dir = "/nonexistent";
  Keys keys;
  auto made =
      make_formpost(parsed->section("filter:formpost"), MiddlewareContext{swift, dir, keys});
  REQUIRE(made.ok());
  auto info = (*made)->info();
  REQUIRE(info);
  CHECK(info->first == "formpost");
  CHECK(info->second ==
        "{\"allowed_digests\": [\"sha1\", \"sha256\", \"sha512\"], "
        "\"deprecated_digests\": [\"sha1\"]}");
  parsed = common::Config::parse(
      "[filter:formpost]\nuse = egg:swift#formpost\nallowed_digests = sha512 sha256\n");
  made = make_formpost(parsed->section("filter:formpost"), MiddlewareContext{swift, dir, keys});
  REQUIRE(made.ok());
  CHECK((*made)->info()->second == "{\"allowed_digests\": [\"sha256\", \"sha512\"]}");
}

}  // namespace
}  // namespace apus::proxy
