// The symlink middleware without sockets: its pure parts (target checks and Swift's bodies, the
// container-update override ETag, cgi.parse_header, the listing rewrite, one step of following
// links) against what Swift 2.30.1 gives, then the middleware on a fake object store standing
// for the rest of the pipeline (following links, loops, static links, ?symlink=get, PUT checks,
// POST's 307, listings).
#include "proxy/symlink.h"

#include <cstring>
#include <map>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <doctest/doctest.h>

#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "proxy/subrequest.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
namespace sl = symlink;

// ---- pure parts ------------------------------------------------------------------------------

HeaderMap with_target(std::string target) {
  HeaderMap h;
  h.set("X-Symlink-Target", target);
  return h;
}

TEST_CASE("symlink: a target is re-quoted and a dynamic link gets application/symlink") {
  HeaderMap h = with_target("tgt/dealde%2Fl04 011e%204c8df/flash.png");
  auto t = sl::prepare_put(h, "AUTH_a", "links", "l");
  REQUIRE(t.ok());
  CHECK(t->path == "/v1/AUTH_a/tgt/dealde/l04 011e 4c8df/flash.png");
  CHECK(t->etag.empty());
  CHECK(h.get_or("X-Symlink-Target", "") == "tgt/dealde/l04%20011e%204c8df/flash.png");
  CHECK(h.get_or("Content-Type", "") == "application/symlink");
  CHECK(!h.contains("X-Symlink-Target-Account"));
}

TEST_CASE("symlink: the client's Content-Type stays, and a static link gets none") {
  HeaderMap h = with_target("c/o");
  h.set("Content-Type", "text/x-mine");
  REQUIRE(sl::prepare_put(h, "AUTH_a", "links", "l").ok());
  CHECK(h.get_or("Content-Type", "") == "text/x-mine");
  HeaderMap s = with_target("c/o");
  s.set("X-Symlink-Target-Etag", "\"abc\"");
  auto t = sl::prepare_put(s, "AUTH_a", "links", "l");
  REQUIRE(t.ok());
  CHECK(t->etag == "abc");
  CHECK(!s.contains("Content-Type"));
}

TEST_CASE("symlink: bad targets get Swift's statuses, types and bodies") {
  auto refusal = [](HeaderMap h) {
    auto t = sl::prepare_put(h, "AUTH_a", "links", "l");
    REQUIRE(!t.ok());
    return std::move(t).refusal();
  };
  Response r = refusal(with_target("just-an-object"));
  CHECK(r.status == 412);
  CHECK(r.body == "X-Symlink-Target header must be of the form <container name>/<object name>");
  CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  r = refusal(with_target("/c/o"));  // a leading slash: the same body, as text/plain
  CHECK(r.status == 412);
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  CHECK(r.body == "X-Symlink-Target header must be of the form <container name>/<object name>");
  r = refusal(with_target("links/l"));
  CHECK(r.status == 400);
  CHECK(r.body == "Symlink cannot target itself");
  HeaderMap other = with_target("links/l");
  other.set("X-Symlink-Target-Account", "AUTH_b");
  CHECK(sl::prepare_put(other, "AUTH_a", "links", "l").ok());  // another account's links/l
  HeaderMap empty = with_target("c/o");
  empty.set("X-Symlink-Target-Account", "");
  r = refusal(empty);
  CHECK(r.status == 412);
  CHECK(r.body == "Account name cannot be empty");
  HeaderMap slash = with_target("c/o");
  slash.set("X-Symlink-Target-Account", "a%2Fb");
  r = refusal(slash);
  CHECK(r.status == 412);
  CHECK(r.body == "Account name cannot contain slashes");
  for (const char* etag : {"a;b", "a\"b", "a\\b"}) {
    HeaderMap bad = with_target("c/o");
    bad.set("X-Symlink-Target-Etag", etag);
    r = refusal(bad);
    CHECK(r.status == 400);
    CHECK(r.body == "Bad X-Symlink-Target-Etag format");
    CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  }
}

TEST_CASE("symlink: the link's sysmeta and override ETag are spelt as Swift's") {
  HeaderMap h = with_target("c/o x");
  h.set("X-Symlink-Target-Account", "AUTH_b");
  REQUIRE(sl::prepare_put(h, "AUTH_a", "links", "l").ok());
  sl::finish_put_headers(h);
  CHECK(!h.contains("X-Symlink-Target"));
  CHECK(!h.contains("X-Symlink-Target-Account"));
  CHECK(h.get_or("X-Object-Sysmeta-Symlink-Target", "") == "c/o%20x");
  CHECK(h.get_or("X-Object-Sysmeta-Symlink-Target-Account", "") == "AUTH_b");
  CHECK(h.get_or("X-Object-Sysmeta-Container-Update-Override-Etag", "") ==
        "d41d8cd98f00b204e9800998ecf8427e; symlink_target=c/o%20x; "
        "symlink_target_account=AUTH_b");

  // A static link, and an override already there (a copied link, or an SLO's slo_etag).
  HeaderMap s = with_target("c/o");
  s.set("X-Object-Sysmeta-Container-Update-Override-Etag",
        "d41d8cd98f00b204e9800998ecf8427e; slo_etag=\"abc\"");
  s.set("X-Object-Sysmeta-Symlink-Target-Etag", "e1");
  s.set("X-Object-Sysmeta-Symlink-Target-Bytes", "12");
  sl::finish_put_headers(s);
  CHECK(s.get_or("X-Object-Sysmeta-Container-Update-Override-Etag", "") ==
        "d41d8cd98f00b204e9800998ecf8427e; slo_etag=\"abc\"; symlink_target=c/o; "
        "symlink_target_etag=e1; symlink_target_bytes=12");
}

TEST_CASE("symlink: parse_header is Python's cgi.parse_header") {
  auto [value, params] = sl::parse_header(
      "d41d8cd98f00b204e9800998ecf8427e; symlink_target=c/o%20x; symlink_target_account=AUTH_b; "
      "slo_etag=\"ab\\\"c;d\"; Flag; symlink_target_etag=e1; symlink_target_bytes=12");
  CHECK(value == "d41d8cd98f00b204e9800998ecf8427e");
  using P = std::vector<std::pair<std::string, std::string>>;
  CHECK(params == P{{"symlink_target", "c/o%20x"},
                    {"symlink_target_account", "AUTH_b"},
                    {"slo_etag", "ab\"c;d"},
                    {"symlink_target_etag", "e1"},
                    {"symlink_target_bytes", "12"}});
  auto [v2, p2] = sl::parse_header(" x ;a=1;a=2; b = \"q\" ");
  CHECK(v2 == "x");
  CHECK(p2 == P{{"a", "2"}, {"b", "q"}});
}

TEST_CASE("symlink: path_join, python_repr and normalize_etag are Python's") {
  CHECK(sl::path_join({"/", "v1", "AUTH_a", "c/o"}) == "/v1/AUTH_a/c/o");
  CHECK(sl::path_join({"/", "v1", "AUTH_a", "/abs/o"}) == "/abs/o");
  CHECK(sl::path_join({"/", "v1", "/acc", "c/o"}) == "/acc/c/o");
  CHECK(sl::python_repr("it's") == "\"it's\"");
  CHECK(sl::python_repr("a\"b") == "'a\"b'");
  CHECK(sl::python_repr("a'b\"c") == "'a\\'b\"c'");
  CHECK(sl::python_repr("t\x01\n") == "'t\\x01\\n'");
  CHECK(sl::normalize_etag("\"abc\"") == "abc");
  CHECK(sl::normalize_etag("\"") == "\"");
  CHECK(sl::normalize_etag("abc") == "abc");
}

TEST_CASE("symlink: the listing rewrite gives Swift's bytes") {
  // Input and expected output from Swift 2.30.1's SymlinkContainerContext and json.dumps.
  const std::string in =
      "[{\"bytes\": 0, \"hash\": \"d41d8cd98f00b204e9800998ecf8427e; symlink_target=c/o%20x; "
      "symlink_target_etag=e1; symlink_target_bytes=12\", \"name\": \"l\\u00e9\", "
      "\"content_type\": \"application/symlink\", \"last_modified\": "
      "\"2026-12-01T19:00:00.000000\"}, {\"subdir\": \"d/\"}, {\"bytes\": 3, \"hash\": \"abc; "
      "slo_etag=x\", \"name\": \"p\", \"content_type\": \"t\", \"last_modified\": \"x\"}, "
      "{\"bytes\": 0, \"hash\": \"d41d8cd98f00b204e9800998ecf8427e; symlink_target=c2/o2; "
      "symlink_target_account=AUTH_b\", \"name\": \"x\", \"content_type\": \"a\", "
      "\"last_modified\": \"y\"}]";
  const std::string want =
      "[{\"bytes\": 0, \"hash\": \"d41d8cd98f00b204e9800998ecf8427e\", \"name\": \"l\\u00e9\", "
      "\"content_type\": \"application/symlink\", \"last_modified\": "
      "\"2026-12-01T19:00:00.000000\", \"symlink_etag\": \"e1\", \"symlink_bytes\": 12, "
      "\"symlink_path\": \"/v1/AUTH_a/c/o%20x\"}, {\"subdir\": \"d/\"}, {\"bytes\": 3, "
      "\"hash\": \"abc; slo_etag=x\", \"name\": \"p\", \"content_type\": \"t\", "
      "\"last_modified\": \"x\"}, {\"bytes\": 0, \"hash\": "
      "\"d41d8cd98f00b204e9800998ecf8427e\", \"name\": \"x\", \"content_type\": \"a\", "
      "\"last_modified\": \"y\", \"symlink_path\": \"/v1/AUTH_b/c2/o2\"}]";
  auto out = sl::rewrite_listing(in, "v1", "AUTH_a");
  REQUIRE(out);
  CHECK(*out == want);
  CHECK(sl::rewrite_listing("[]", "v1", "AUTH_a") == std::optional<std::string>("[]"));
  CHECK(!sl::rewrite_listing("not json", "v1", "AUTH_a"));
  CHECK(!sl::rewrite_listing("[{\"hash\": \"x; symlink_target_bytes=many\"}]", "v1", "a"));
}

TEST_CASE("symlink: one step of following links") {
  HeaderMap plain;
  plain.set("Etag", "abc");
  CHECK(sl::classify(plain, "v1", "AUTH_a", true, "", 0, 2).kind == sl::Step::kFinal);
  auto changed = sl::classify(plain, "v1", "AUTH_a", true, "not-it", 1, 2);
  CHECK(changed.kind == sl::Step::kTargetChanged);
  CHECK(changed.body == "Object Etag 'abc' does not match X-Symlink-Target-Etag header 'not-it'");

  HeaderMap link;
  link.set("Etag", std::string(sl::kEmptyEtag));
  link.set("X-Object-Sysmeta-Symlink-Target", "c/o%20x");
  auto step = sl::classify(link, "v1", "AUTH a", true, "", 0, 2);
  CHECK(step.kind == sl::Step::kFollow);
  CHECK(step.next_path == "/v1/AUTH%20a/c/o%20x");
  CHECK(step.next_etag.empty());
  CHECK(step.counts);
  CHECK(sl::classify(link, "v1", "AUTH_a", true, "", 2, 2).kind == sl::Step::kTooMany);
  // A PUT's check follows static links only; a dynamic link is its final object.
  CHECK(sl::classify(link, "v1", "AUTH_a", false, std::string(sl::kEmptyEtag), 0, 2).kind ==
        sl::Step::kFinal);
  link.set("X-Object-Sysmeta-Symlink-Target-Etag", "e1");
  link.set("X-Object-Sysmeta-Symlink-Target-Account", "AUTH_b");
  link.set("X-Object-Sysmeta-Symloop-Extend", "true");
  step = sl::classify(link, "v1", "AUTH_a", false, "", 0, 2);
  CHECK(step.kind == sl::Step::kFollow);
  CHECK(step.next_path == "/v1/AUTH_b/c/o%20x");
  CHECK(step.next_etag == "e1");
  CHECK(!step.counts);
  CHECK(sl::classify(link, "v1", "AUTH_a", true, "e2", 0, 2).kind == sl::Step::kEtagsDiffer);
}

TEST_CASE("symlink: /info and symloop_max") {
  auto check = [](std::string text, std::string want) {
    auto parsed = common::Config::parse("[filter:symlink]\nuse = egg:swift#symlink\n" + text);
    REQUIRE(parsed.ok());
    common::SwiftConf swift;
    std::string dir = "/nonexistent";
    struct NoInfo : InfoLookup {
      net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                              const ProxyEnv&) override {
        co_return CachedInfo{};
      }
      net::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                                const Request&, const ProxyEnv&) override {
        co_return CachedInfo{};
      }
      net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
        co_return;
      }
    } info;
    auto mw = make_symlink(parsed->section("filter:symlink"), MiddlewareContext{swift, dir, info});
    REQUIRE(mw.ok());
    auto i = (*mw)->info();
    REQUIRE(i);
    CHECK(i->first == "symlink");
    CHECK(i->second == want);
  };
  check("", "{\"symloop_max\": 2, \"static_links\": true}");
  check("symloop_max = 5\n", "{\"symloop_max\": 5, \"static_links\": true}");
  check("symloop_max = 0\n", "{\"symloop_max\": 2, \"static_links\": true}");
}

// ---- the middleware on a fake store ----------------------------------------------------------

// Runs the coroutine `f()` to its end on a fresh io_context.
template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

// Objects by decoded path, answered as the proxy app answers: GET streamed, the rest whole.
struct Store {
  struct Object {
    HeaderMap headers;  // Etag, Content-Type and metadata as stored
    std::string body;
  };
  std::map<std::string, Object> objects;
  std::vector<Request> seen;

  void put(const std::string& path, std::string body, std::string etag,
           std::string type = "application/target") {
    Object o;
    o.headers.set("Etag", etag);
    o.headers.set("Content-Type", type);
    o.body = std::move(body);
    objects[path] = std::move(o);
  }

  Next app() {
    return [this](Exchange& ex, ProxyEnv&) -> net::awaitable<void> {
      const Request& req = ex.request();
      seen.push_back(req);
      std::string path = common::http::percent_decode(req.path());
      auto segs = common::http::split_path(path, 3, 4, true);
      REQUIRE(segs.ok());
      if (!(*segs)[3]) co_return co_await ex.reply(listing(path));
      auto it = objects.find(path);
      if (req.method == "PUT") {
        Object o;
        o.headers = req.headers;
        o.headers.set("Etag", std::string(sl::kEmptyEtag));
        objects[path] = std::move(o);
        co_return co_await ex.reply(common::http::swob_response(201));
      }
      if (it == objects.end()) co_return co_await ex.reply(common::http::swob_response(404));
      Object& o = it->second;
      if (req.method == "POST") {
        for (const auto& [k, v] : req.headers) {
          if (common::http::istarts_with(k, "x-object-meta-")) o.headers.set(k, v);
        }
        Response r = common::http::swob_response(202);
        for (const auto& [k, v] : o.headers) {
          if (common::http::istarts_with(k, "x-object-sysmeta-")) r.headers.set(k, v);
        }
        co_return co_await ex.reply(std::move(r));
      }
      HeaderMap h = o.headers;
      h.set("Content-Length", std::to_string(o.body.size()));
      if (req.method == "HEAD") {
        Response r;
        r.headers = std::move(h);
        co_return co_await ex.reply(std::move(r));
      }
      h.erase("Content-Length");
      if (!(co_await ex.start_response(200, std::move(h), o.body.size())).ok()) co_return;
      if (!o.body.empty() && !(co_await ex.write_body(o.body)).ok()) co_return;
      (void)co_await ex.finish_response();
    };
  }

  // The container server's JSON listing: the override ETag (when set) is the hash.
  Response listing(const std::string& container_path) {
    std::vector<common::listing::ObjectItem> items;
    for (const auto& [path, o] : objects) {
      if (!path.starts_with(container_path + "/")) continue;
      common::listing::ObjectItem item;
      item.name = path.substr(container_path.size() + 1);
      item.bytes = static_cast<int64_t>(o.body.size());
      item.hash = std::string(o.headers.get_or(sl::kOverrideEtag, o.headers.get_or("Etag", "")));
      item.content_type = std::string(o.headers.get_or("Content-Type", ""));
      item.last_modified = "2026-12-01T19:00:00.000000";
      items.push_back(std::move(item));
    }
    Response r;
    r.headers.set("Content-Type", "application/json; charset=utf-8");
    r.body = common::listing::to_json(items);
    return r;
  }
};

struct Fixture {
  Store store;
  std::unique_ptr<Middleware> mw;
  Next store_app = store.app();

  Fixture() {
    auto parsed = common::Config::parse("[filter:symlink]\nuse = egg:swift#symlink\n");
    common::SwiftConf swift;
    std::string dir = "/nonexistent";
    struct NoInfo : InfoLookup {
      net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                              const ProxyEnv&) override {
        co_return CachedInfo{};
      }
      net::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                                const Request&, const ProxyEnv&) override {
        co_return CachedInfo{};
      }
      net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
        co_return;
      }
    } info;
    auto made =
        make_symlink(parsed->section("filter:symlink"), MiddlewareContext{swift, dir, info});
    REQUIRE(made.ok());
    mw = std::move(made.value());
    store.put("/v1/AUTH_a/tgt/o", "target body", "ab706c400731332bffa67ed4bc15dcac");
  }

  // One request through the middleware and the store; the whole answer.
  Response call(std::string method, std::string path, HeaderMap headers = {},
                std::string query = "") {
    Next through = [this](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, store_app); };
    Request req = make_subrequest(std::move(method), path, query, std::move(headers));
    std::optional<common::Result<Response>> r;
    run([&]() -> net::awaitable<void> {
      r.emplace(co_await run_subrequest(through, std::move(req), ProxyEnv{}, 1 << 20));
    });
    REQUIRE(r->ok());
    return std::move(**r);
  }

  void link(std::string path, std::string target, std::string etag = "") {
    HeaderMap h = with_target(target);
    if (!etag.empty()) h.set("X-Symlink-Target-Etag", etag);
    Response r = call("PUT", path, h);
    REQUIRE(r.status == 201);
  }
};

TEST_CASE_FIXTURE(Fixture, "symlink: GET and HEAD follow a link, with Content-Location") {
  link("/v1/AUTH_a/links/l", "tgt/o");
  const Store::Object& stored = store.objects.at("/v1/AUTH_a/links/l");
  CHECK(stored.headers.get_or("X-Object-Sysmeta-Symlink-Target", "") == "tgt/o");
  CHECK(stored.headers.get_or("Content-Type", "") == "application/symlink");
  CHECK(stored.headers.get_or(sl::kOverrideEtag, "") ==
        "d41d8cd98f00b204e9800998ecf8427e; symlink_target=tgt/o");
  Response r = call("GET", "/v1/AUTH_a/links/l");
  CHECK(r.status == 200);
  CHECK(r.body == "target body");
  CHECK(r.headers.get_or("Content-Location", "") == "/v1/AUTH_a/tgt/o");
  CHECK(r.headers.get_or("Etag", "") == "ab706c400731332bffa67ed4bc15dcac");
  CHECK(store.seen.back().headers.get_or("X-Backend-Ignore-Range-If-Metadata-Present", "") ==
        "X-Object-Sysmeta-Symlink-Target");
  r = call("HEAD", "/v1/AUTH_a/links/l");
  CHECK(r.status == 200);
  CHECK(r.headers.get_or("Content-Length", "") == "11");
  // The target itself has no Content-Location.
  CHECK(!call("GET", "/v1/AUTH_a/tgt/o").headers.contains("Content-Location"));
  // A link to nowhere: the 404 says where it looked.
  link("/v1/AUTH_a/links/nowhere", "tgt/missing");
  r = call("GET", "/v1/AUTH_a/links/nowhere");
  CHECK(r.status == 404);
  CHECK(r.headers.get_or("Content-Location", "") == "/v1/AUTH_a/tgt/missing");
}

TEST_CASE_FIXTURE(Fixture, "symlink: ?symlink=get reads the link itself") {
  HeaderMap h = with_target("tgt/o");
  h.set("X-Symlink-Target-Account", "AUTH_a");
  REQUIRE(call("PUT", "/v1/AUTH_a/links/l", h).status == 201);
  Response r = call("GET", "/v1/AUTH_a/links/l", {}, "symlink=get");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  CHECK(r.headers.get_or("X-Symlink-Target", "") == "tgt/o");
  CHECK(r.headers.get_or("X-Symlink-Target-Account", "") == "AUTH_a");
  CHECK(!r.headers.contains("X-Object-Sysmeta-Symlink-Target"));
}

TEST_CASE_FIXTURE(Fixture, "symlink: symloop_max links are followed, one more is a 409") {
  link("/v1/AUTH_a/tgt/l1", "tgt/o");
  link("/v1/AUTH_a/tgt/l2", "tgt/l1");
  Response r = call("GET", "/v1/AUTH_a/tgt/l2");
  CHECK(r.status == 200);
  CHECK(r.body == "target body");
  CHECK(r.headers.get_or("Content-Location", "") == "/v1/AUTH_a/tgt/o");
  link("/v1/AUTH_a/tgt/l3", "tgt/l2");
  r = call("GET", "/v1/AUTH_a/tgt/l3");
  CHECK(r.status == 409);
  CHECK(r.body == "Too many levels of symbolic links, maximum allowed is 2");
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  // Two links naming each other.
  link("/v1/AUTH_a/links/a", "links/b");
  link("/v1/AUTH_a/links/b", "links/a");
  CHECK(call("HEAD", "/v1/AUTH_a/links/a").status == 409);
}

TEST_CASE_FIXTURE(Fixture, "symlink: a static link checks its target at PUT and GET") {
  // PUT: the target is HEADed; its size, ETag and type go into the link's sysmeta.
  link("/v1/AUTH_a/links/s", "tgt/o", "\"ab706c400731332bffa67ed4bc15dcac\"");
  const Store::Object& stored = store.objects.at("/v1/AUTH_a/links/s");
  CHECK(stored.headers.get_or("X-Object-Sysmeta-Symlink-Target-Etag", "") ==
        "ab706c400731332bffa67ed4bc15dcac");
  CHECK(stored.headers.get_or("X-Object-Sysmeta-Symlink-Target-Bytes", "") == "11");
  CHECK(stored.headers.get_or("Content-Type", "") == "application/target");
  CHECK(stored.headers.get_or(sl::kOverrideEtag, "") ==
        "d41d8cd98f00b204e9800998ecf8427e; symlink_target=tgt/o; "
        "symlink_target_etag=ab706c400731332bffa67ed4bc15dcac; symlink_target_bytes=11");
  CHECK(call("GET", "/v1/AUTH_a/links/s").status == 200);

  // The target changes: GET and HEAD answer 409, still saying where the link points.
  store.put("/v1/AUTH_a/tgt/o", "updated", "0123456789abcdef0123456789abcdef");
  Response r = call("GET", "/v1/AUTH_a/links/s");
  CHECK(r.status == 409);
  CHECK(r.body ==
        "Object Etag '0123456789abcdef0123456789abcdef' does not match X-Symlink-Target-Etag "
        "header 'ab706c400731332bffa67ed4bc15dcac'");
  CHECK(r.headers.get_or("Content-Location", "") == "/v1/AUTH_a/tgt/o");

  // PUT with a wrong ETag, and to a missing target.
  HeaderMap wrong = with_target("tgt/o");
  wrong.set("X-Symlink-Target-Etag", "not-the-real-etag");
  r = call("PUT", "/v1/AUTH_a/links/w", wrong);
  CHECK(r.status == 409);
  CHECK(r.body ==
        "Object Etag '0123456789abcdef0123456789abcdef' does not match X-Symlink-Target-Etag "
        "header 'not-the-real-etag'");
  HeaderMap missing = with_target("tgt/none");
  missing.set("X-Symlink-Target-Etag", std::string(sl::kEmptyEtag));
  r = call("PUT", "/v1/AUTH_a/links/w", missing);
  CHECK(r.status == 409);
  CHECK(r.body == "X-Symlink-Target does not exist");
  CHECK(r.headers.get_or("Content-Location", "") == "/v1/AUTH_a/tgt/none");
  CHECK(!store.objects.contains("/v1/AUTH_a/links/w"));
}

TEST_CASE_FIXTURE(Fixture, "symlink: a static link to a dynamic link matches the empty ETag") {
  link("/v1/AUTH_a/links/d", "tgt/o");
  link("/v1/AUTH_a/links/s", "links/d", std::string(sl::kEmptyEtag));
  const Store::Object& stored = store.objects.at("/v1/AUTH_a/links/s");
  CHECK(stored.headers.get_or("X-Object-Sysmeta-Symlink-Target-Bytes", "") == "0");
  CHECK(stored.headers.get_or("Content-Type", "") == "application/symlink");
  Response r = call("GET", "/v1/AUTH_a/links/s");
  CHECK(r.status == 200);
  CHECK(r.body == "target body");
}

TEST_CASE_FIXTURE(Fixture, "symlink: a PUT with a body, and a POST with a target, are refused") {
  HeaderMap h = with_target("tgt/o");
  Next through = [this](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, store_app); };
  Request req = make_subrequest("PUT", "/v1/AUTH_a/links/l", "", h);
  req.content_length = 4;
  struct Four : BodySource {
    bool done = false;
    net::awaitable<common::Result<size_t>> read(std::span<char> buf) override {
      if (done) co_return size_t{0};
      done = true;
      std::memcpy(buf.data(), "body", 4);
      co_return size_t{4};
    }
  } body;
  std::optional<common::Result<Response>> r;
  run([&]() -> net::awaitable<void> {
    r.emplace(
        co_await run_subrequest_with_body(through, std::move(req), ProxyEnv{}, body, 1 << 20));
  });
  REQUIRE((*r).ok());
  CHECK((*r)->status == 400);
  CHECK((*r)->body == "Symlink requests require a zero byte body");
  Response p = call("POST", "/v1/AUTH_a/tgt/o", with_target("c/new"));
  CHECK(p.status == 400);
  CHECK(p.body == "A PUT request is required to set a symlink target");
}

TEST_CASE_FIXTURE(Fixture, "symlink: POST to a link is applied to it and answers 307") {
  link("/v1/AUTH_a/links/s", "tgt/o", "ab706c400731332bffa67ed4bc15dcac");
  HeaderMap meta;
  meta.set("X-Object-Meta-Alpha", "apple");
  Response r = call("POST", "/v1/AUTH_a/links/s", meta);
  CHECK(r.status == 307);
  CHECK(r.headers.get_or("Location", "") == "/v1/AUTH_a/tgt/o");
  CHECK(r.headers.get_or("X-Symlink-Target-Etag", "") == "ab706c400731332bffa67ed4bc15dcac");
  CHECK(r.body ==
        "The requested POST was applied to a symlink. POST directly to the target to apply "
        "requested metadata.");
  CHECK(store.objects.at("/v1/AUTH_a/links/s").headers.get_or("X-Object-Meta-Alpha", "") ==
        "apple");
  // A plain object answers as it did.
  CHECK(call("POST", "/v1/AUTH_a/tgt/o", meta).status == 202);
}

TEST_CASE_FIXTURE(Fixture, "symlink: the container listing shows links' targets") {
  link("/v1/AUTH_a/links/d", "tgt/o");
  link("/v1/AUTH_a/links/s", "tgt/o", "ab706c400731332bffa67ed4bc15dcac");
  Response r = call("GET", "/v1/AUTH_a/links", {}, "format=json");
  CHECK(r.status == 200);
  CHECK(r.body ==
        "[{\"bytes\": 0, \"hash\": \"d41d8cd98f00b204e9800998ecf8427e\", \"name\": \"d\", "
        "\"content_type\": \"application/symlink\", \"last_modified\": "
        "\"2026-12-01T19:00:00.000000\", \"symlink_path\": \"/v1/AUTH_a/tgt/o\"}, "
        "{\"bytes\": 0, \"hash\": \"d41d8cd98f00b204e9800998ecf8427e\", \"name\": \"s\", "
        "\"content_type\": \"application/target\", \"last_modified\": "
        "\"2026-12-01T19:00:00.000000\", \"symlink_etag\": "
        "\"ab706c400731332bffa67ed4bc15dcac\", \"symlink_bytes\": 11, \"symlink_path\": "
        "\"/v1/AUTH_a/tgt/o\"}]");
}

}  // namespace
}  // namespace apus::proxy
