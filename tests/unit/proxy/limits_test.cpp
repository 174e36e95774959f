// The small middlewares of proxy/limits.h without sockets: each is run on a recording exchange
// with scripted account and container info, and what it answers (or passes on) is compared
// with what Swift 2.30.1's middleware does for the same request.
#include "proxy/limits.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/config/config.h"
#include "proxy/middleware.h"
#include "proxy/pipeline.h"
#include "tests/unit/proxy/recording_exchange.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

using testing::RecordingExchange;

// Account and container info as the test scripts it.
class ScriptedInfo final : public InfoLookup {
 public:
  CachedInfo account{200, {}, {}};
  CachedInfo container{200, {}, {}};
  std::vector<std::string> asked;  // "a:<account>" and "c:<account>/<container>"

  net::awaitable<CachedInfo> account_info(const std::string& a, const Request&,
                                          const ProxyEnv&) override {
    asked.push_back("a:" + a);
    co_return account;
  }
  net::awaitable<CachedInfo> container_info(const std::string& a, const std::string& c,
                                            const Request&, const ProxyEnv&) override {
    asked.push_back("c:" + a + "/" + c);
    co_return container;
  }
  net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

struct Fixture {
  common::SwiftConf swift;
  std::string swift_dir = "/nonexistent";
  ScriptedInfo info;
  std::unique_ptr<Middleware> mw;
  // What the rest of the pipeline saw, and what it answers.
  std::optional<Request> passed;
  Response app_answer{200, "", {}, "app"};

  void make(std::string_view entry, std::string options = "") {
    auto conf = common::Config::parse("[filter:x]\nuse = egg:swift#" + std::string(entry) +
                                      "\n" + options);
    REQUIRE(conf.ok());
    auto built = make_middleware(entry, conf->section("filter:x"),
                                 MiddlewareContext{swift, swift_dir, info});
    REQUIRE_MESSAGE(built.ok(), built.status().to_string());
    mw = std::move(*built);
  }

  // Runs `req` through the middleware; the answer the client got.
  Response run(Request req, ProxyEnv& env) {
    passed.reset();
    RecordingExchange ex(std::move(req));
    Next next = [this](common::http::Exchange& e, ProxyEnv&) -> net::awaitable<void> {
      passed = e.request();
      co_await e.reply(app_answer);
    };
    net::io_context ioc;
    auto done = net::co_spawn(ioc, mw->call(ex, env, next), net::use_future);
    ioc.run();
    done.get();
    REQUIRE(ex.response_);
    return *ex.response_;
  }
  Response run(Request req) {
    ProxyEnv env;
    return run(std::move(req), env);
  }
};

Request make_req(std::string method, std::string target, HeaderMap headers = {},
                 std::optional<uint64_t> length = std::nullopt) {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.headers = std::move(headers);
  r.content_length = length;
  return r;
}

HeaderMap hdrs(std::initializer_list<std::pair<const char*, const char*>> list) {
  HeaderMap h;
  for (auto [k, v] : list) h.set(k, v);
  return h;
}

// An authorize callback that denies with `status` (0: allows), recording the ACL it saw.
Authorize authorize_with(int status, std::optional<std::string>* acl_seen = nullptr) {
  return [status, acl_seen](const Request&, ProxyEnv& env)
             -> net::awaitable<std::optional<Response>> {
    if (acl_seen) *acl_seen = env.acl;
    if (status == 0) co_return std::nullopt;
    co_return Response{status, "", {}, "denied"};
  };
}

std::optional<Response> call_authorize(ProxyEnv& env, const Request& req) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, env.authorize(req, env), net::use_future);
  ioc.run();
  return done.get();
}

// ---- container_quotas ------------------------------------------------------------------------

TEST_CASE("container_quotas: a PUT past the bytes quota is 413, one within it goes on") {
  Fixture f;
  f.make("container_quotas");
  f.info.container.headers = hdrs({{"X-Container-Meta-Quota-Bytes", "10"},
                                   {"X-Container-Bytes-Used", "4"},
                                   {"X-Container-Object-Count", "1"}});
  Response r = f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 7));
  CHECK(r.status == 413);
  CHECK(r.body == "Upload exceeds quota.");
  CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  CHECK(!f.passed);
  r = f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 6));
  CHECK(r.status == 200);
  CHECK(f.passed);
  // A chunked upload counts as 0 bytes, as in Swift.
  r = f.run(make_req("PUT", "/v1/AUTH_a/c/o"));
  CHECK(r.status == 200);
}

TEST_CASE("container_quotas: the count quota counts the new object") {
  Fixture f;
  f.make("container_quotas");
  f.info.container.headers = hdrs({{"X-Container-Meta-Quota-Count", "2"},
                                   {"X-Container-Bytes-Used", "0"},
                                   {"X-Container-Object-Count", "2"}});
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 0)).status == 413);
  f.info.container.headers.set("X-Container-Object-Count", "1");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 0)).status == 200);
}

TEST_CASE("container_quotas: a user who could not write gets the auth answer, not 413") {
  Fixture f;
  f.make("container_quotas");
  f.info.container.headers = hdrs({{"X-Container-Meta-Quota-Bytes", "1"},
                                   {"X-Container-Write", "AUTH_b:user"}});
  ProxyEnv env;
  std::optional<std::string> acl;
  env.authorize = authorize_with(401, &acl);
  Response r = f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 5), env);
  CHECK(r.status == 401);
  CHECK(acl == std::optional<std::string>("AUTH_b:user"));
  env.authorize = authorize_with(0);
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 5), env).status == 413);
}

TEST_CASE("container_quotas: quota headers must be digits on container PUT and POST") {
  Fixture f;
  f.make("container_quotas");
  Response r = f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Meta-Quota-Bytes", "-1"}})));
  CHECK(r.status == 400);
  CHECK(r.body == "Invalid bytes quota.");
  r = f.run(make_req("PUT", "/v1/AUTH_a/c", hdrs({{"X-Container-Meta-Quota-Count", "1.5"}})));
  CHECK(r.status == 400);
  CHECK(r.body == "Invalid count quota.");
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Meta-Quota-Bytes", ""}}))).status == 200);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Meta-Quota-Bytes", "12"}}))).status == 200);
  // Not checked on objects or accounts.
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c/o", hdrs({{"X-Container-Meta-Quota-Bytes", "x"}}))).status == 200);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Container-Meta-Quota-Bytes", "x"}}))).status == 200);
}

TEST_CASE("container_quotas: Python's isdigit and a quota int() refuses") {
  CHECK(quotas::python_isdigit("0123"));
  CHECK(!quotas::python_isdigit(""));
  CHECK(!quotas::python_isdigit("+1"));
  CHECK(!quotas::python_isdigit(" 1"));
  CHECK(quotas::python_isdigit("1\xb2"));
  CHECK(quotas::digits_value("42") == std::optional<int64_t>(42));
  CHECK(!quotas::digits_value("4\xb2"));
  CHECK(quotas::digits_value("99999999999999999999999") ==
        std::optional<int64_t>(std::numeric_limits<int64_t>::max()));
  Fixture f;
  f.make("container_quotas");
  f.info.container.headers = hdrs({{"X-Container-Meta-Quota-Bytes", "1\xb2"}});
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 1)).status == 500);
}

TEST_CASE("container_quotas: Swift's substring test of PUT, and a missing container") {
  Fixture f;
  f.make("container_quotas");
  f.info.container.headers = hdrs({{"X-Container-Meta-Quota-Bytes", "0"}});
  CHECK(f.run(make_req("UT", "/v1/AUTH_a/c/o", {}, 1)).status == 413);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c/o", {}, 1)).status == 200);
  f.info.container.status = 404;
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 1)).status == 200);
  CHECK(f.mw->info() == std::make_optional(std::make_pair(std::string("container_quotas"),
                                                          std::string("{}"))));
}

// ---- account_quotas --------------------------------------------------------------------------

TEST_CASE("account_quotas: only a reseller sets the quota, with digits") {
  Fixture f;
  f.make("account_quotas");
  Response r = f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Meta-Quota-Bytes", "10"}})));
  CHECK(r.status == 403);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Meta-Quota-Bytes", ""}}))).status == 403);
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a", hdrs({{"X-Remove-Account-Meta-Quota-Bytes", "x"}}))).status == 403);
  // An empty X-Remove- removes nothing.
  CHECK(f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Remove-Account-Meta-Quota-Bytes", ""}}))).status == 200);
  // Meaningless on containers and objects.
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Account-Meta-Quota-Bytes", "1"}}))).status == 200);
  ProxyEnv reseller;
  reseller.reseller_request = true;
  CHECK(f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Meta-Quota-Bytes", "10"}})), reseller).status == 200);
  r = f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Meta-Quota-Bytes", "ten"}})), reseller);
  CHECK(r.status == 400);
  CHECK(r.body.find("Bad Request") != std::string::npos);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Meta-Quota-Bytes", "ten"},
                                                  {"X-Remove-Account-Meta-Quota-Bytes", "1"}})),
              reseller).status == 200);
}

TEST_CASE("account_quotas: an object PUT past the quota is refused by the authorize step") {
  Fixture f;
  f.make("account_quotas");
  f.info.account.headers = hdrs({{"X-Account-Meta-Quota-Bytes", "10"},
                                 {"X-Account-Bytes-Used", "8"}});
  // No auth middleware: 413 at once.
  Response r = f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 3));
  CHECK(r.status == 413);
  CHECK(r.body == "Upload exceeds quota.");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 2)).status == 200);
  // With one: the request goes on, and authorize() answers 413 unless it denies first.
  ProxyEnv env;
  env.authorize = authorize_with(0);
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 3), env).status == 200);
  REQUIRE(f.passed);
  auto denied = call_authorize(env, *f.passed);
  REQUIRE(denied);
  CHECK(denied->status == 413);
  CHECK(denied->body == "Upload exceeds quota.");
  ProxyEnv stranger;
  stranger.authorize = authorize_with(403);
  f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 3), stranger);
  denied = call_authorize(stranger, *f.passed);
  REQUIRE(denied);
  CHECK(denied->status == 403);
  // Resellers are not limited; a quota that is not an integer is none.
  ProxyEnv reseller;
  reseller.reseller_request = true;
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 30), reseller).status == 200);
  f.info.account.headers.set("X-Account-Meta-Quota-Bytes", "lots");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 30)).status == 200);
  f.info.account.headers.set("X-Account-Meta-Quota-Bytes", "-1");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", {}, 30)).status == 200);
}

// ---- name_check ------------------------------------------------------------------------------

TEST_CASE("name_check: forbidden characters, length and substrings, with Swift's bodies") {
  Fixture f;
  f.make("name_check");
  Response r = f.run(make_req("PUT", "/v1/a/c/o%3Cx"));
  CHECK(r.status == 400);
  CHECK(r.body == "Object/Container/Account name contains forbidden chars from '\"`<>");
  r = f.run(make_req("PUT", "/v1/a/c/" + std::string(250, 'x')));
  CHECK(r.status == 400);
  CHECK(r.body == "Object/Container/Account name longer than the allowed maximum 255");
  CHECK(f.run(make_req("PUT", "/v1/a/c/" + std::string(247, 'x'))).status == 200);
  for (const char* bad : {"/v1/a/c/./o", "/v1/a/c/../o", "/v1/a/c/.", "/v1/a/c/%2E%2E"}) {
    r = f.run(make_req("PUT", bad));
    CHECK_MESSAGE(r.status == 400, bad);
    CHECK(r.body == "Object/Container/Account name contains a forbidden substring from regular "
                    "expression /\\./|/\\.\\./|/\\.$|/\\.\\.$");
  }
  // '$' is the end of the path, not of a line.
  CHECK(f.run(make_req("PUT", "/v1/a/c/.%0Ax")).status == 200);
  CHECK(f.run(make_req("PUT", "/v1/a/c/.o?x=<")).status == 200);
  CHECK(f.mw->info()->second ==
        "{\"forbidden_chars\": \"'\\\"`<>\", \"maximum_length\": 255, \"forbidden_regexp\": "
        "\"/\\\\./|/\\\\.\\\\./|/\\\\.$|/\\\\.\\\\.$\"}");
}

TEST_CASE("name_check: options") {
  Fixture f;
  f.make("name_check", "forbidden_chars = ab\nmaximum_length = 12\nforbidden_regexp =\n");
  CHECK(f.run(make_req("GET", "/v1/x/c/b")).body ==
        "Object/Container/Account name contains forbidden chars from ab");
  CHECK(f.run(make_req("GET", "/v1/x/c/../<")).status == 200);
  CHECK(f.run(make_req("GET", "/v1/x/c/123456")).status == 400);
  CHECK(f.mw->info()->second ==
        "{\"forbidden_chars\": \"ab\", \"maximum_length\": 12, \"forbidden_regexp\": \"\"}");
  auto conf = common::Config::parse("[filter:x]\nmaximum_length = lots\n");
  REQUIRE(conf.ok());
  CHECK(!make_name_check(conf->section("filter:x"), MiddlewareContext{f.swift, f.swift_dir, f.info}).ok());
  conf = common::Config::parse("[filter:x]\nforbidden_regexp = (\n");
  REQUIRE(conf.ok());
  CHECK(!make_name_check(conf->section("filter:x"), MiddlewareContext{f.swift, f.swift_dir, f.info}).ok());
}

// ---- read_only -------------------------------------------------------------------------------

TEST_CASE("read_only: the cluster setting, an account's own, and deletes") {
  Fixture f;
  f.make("read_only", "read_only = true\n");
  CHECK(f.mw->info() == std::make_optional(std::make_pair(std::string("read_only"),
                                                          std::string("{}"))));
  Response r = f.run(make_req("PUT", "/v1/AUTH_a/c/o"));
  CHECK(r.status == 405);
  CHECK(r.body == "Writes are disabled for this account.");
  for (const char* m : {"POST", "COPY", "DELETE"}) {
    CHECK_MESSAGE(f.run(make_req(m, "/v1/AUTH_a/c")).status == 405, m);
  }
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) {
    CHECK_MESSAGE(f.run(make_req(m, "/v1/AUTH_a/c")).status == 200, m);
  }
  CHECK(f.run(make_req("PUT", "/info")).status == 200);
  CHECK(f.run(make_req("PUT", "/v2/AUTH_a/c")).status == 200);
  f.info.account.headers.set("X-Account-Sysmeta-Read-Only", "false");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o")).status == 200);

  Fixture g;
  g.make("read_only", "allow_deletes = yes\n");
  CHECK(!g.mw->info());
  CHECK(g.run(make_req("PUT", "/v1/AUTH_a/c/o")).status == 200);
  g.info.account.headers.set("X-Account-Sysmeta-Read-Only", "on");
  CHECK(g.run(make_req("PUT", "/v1/AUTH_a/c/o")).status == 405);
  CHECK(g.run(make_req("DELETE", "/v1/AUTH_a/c/o")).status == 200);
}

TEST_CASE("read_only: a COPY is judged by its destination account") {
  Fixture f;
  f.make("read_only");
  f.info.account.headers.set("X-Account-Sysmeta-Read-Only", "true");
  CHECK(f.run(make_req("COPY", "/v1/AUTH_a/c/o", hdrs({{"Destination-Account", "AUTH_b"}}))).status == 405);
  CHECK(f.info.asked.back() == "a:AUTH_b");
  Response r = f.run(make_req("COPY", "/v1/AUTH_a/c/o", hdrs({{"Destination-Account", ""}})));
  CHECK(r.status == 412);
  CHECK(r.body == "Account name cannot be empty");
  r = f.run(make_req("COPY", "/v1/AUTH_a/c/o", hdrs({{"Destination-Account", "a/b"}})));
  CHECK(r.status == 412);
  CHECK(r.body == "Account name cannot contain slashes");
}

// ---- etag_quoter -----------------------------------------------------------------------------

TEST_CASE("etag_quoter: the client headers are kept as sysmeta and shown back") {
  Fixture f;
  f.make("etag_quoter");
  CHECK(f.mw->info()->second == "{\"enable_by_default\": false}");
  f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Rfc-Compliant-Etags", "yes"}})));
  REQUIRE(f.passed);
  CHECK(f.passed->headers.get_or("X-Container-Sysmeta-Rfc-Compliant-Etags", "-") == "True");
  f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Rfc-Compliant-Etags", "nope"}})));
  CHECK(f.passed->headers.get_or("X-Account-Sysmeta-Rfc-Compliant-Etags", "-") == "False");
  f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Rfc-Compliant-Etags", ""}})));
  CHECK(f.passed->headers.get_or("X-Account-Sysmeta-Rfc-Compliant-Etags", "-") == "");
  f.run(make_req("POST", "/v1/AUTH_a", hdrs({{"X-Account-Rfc-Compliant-Etags", "t"},
                                             {"X-Remove-Account-Rfc-Compliant-Etags", "1"}})));
  CHECK(f.passed->headers.get_or("X-Account-Sysmeta-Rfc-Compliant-Etags", "-") == "");
  f.app_answer.headers.set("X-Container-Sysmeta-Rfc-Compliant-Etags", "True");
  Response r = f.run(make_req("HEAD", "/v1/AUTH_a/c"));
  CHECK(r.headers.get_or("X-Container-Rfc-Compliant-Etags", "") == "True");
  CHECK(!r.headers.contains("X-Container-Sysmeta-Rfc-Compliant-Etags"));
}

TEST_CASE("etag_quoter: object ETags are quoted as the container, account or default says") {
  Fixture f;
  f.make("etag_quoter");
  f.app_answer.headers.set("Etag", "abc");
  CHECK(f.run(make_req("GET", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "abc");
  f.info.account.headers.set("X-Account-Sysmeta-Rfc-Compliant-Etags", "True");
  CHECK(f.run(make_req("GET", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "\"abc\"");
  f.info.container.headers.set("X-Container-Sysmeta-Rfc-Compliant-Etags", "False");
  CHECK(f.run(make_req("GET", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "abc");
  // Already quoted or weak: left alone.
  f.info.container.headers.set("X-Container-Sysmeta-Rfc-Compliant-Etags", "True");
  f.app_answer.headers.set("Etag", "W/\"abc\"");
  CHECK(f.run(make_req("HEAD", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "W/\"abc\"");
  // A missing container: as it is.
  f.info.container.status = 404;
  f.app_answer.headers.set("Etag", "abc");
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "abc");

  Fixture d;
  d.make("etag_quoter", "enable_by_default = true\n");
  CHECK(d.mw->info()->second == "{\"enable_by_default\": true}");
  d.app_answer.headers.set("Etag", "abc");
  CHECK(d.run(make_req("PUT", "/v1/AUTH_a/c/o")).headers.get_or("Etag", "") == "\"abc\"");
  CHECK(d.run(make_req("GET", "/v2/AUTH_a/c/o")).headers.get_or("Etag", "") == "abc");
}

// ---- domain_remap ----------------------------------------------------------------------------

domain_remap::Options remap_options(std::string text = "") {
  auto conf = common::Config::parse("[filter:x]\n" + text);
  REQUIRE(conf.ok());
  return domain_remap::parse_options(conf->section("filter:x"));
}

std::string remapped(const domain_remap::Options& o, std::string_view host,
                     std::string_view path) {
  auto m = domain_remap::remap(o, host, path);
  if (m.kind == domain_remap::Remap::kPass) return "pass";
  if (m.kind == domain_remap::Remap::kBadDomain) return "400";
  return m.path;
}

TEST_CASE("domain_remap: accounts and containers from the host name") {
  auto o = remap_options();
  CHECK(remapped(o, "AUTH_a.example.com", "/") == "/v1/AUTH_a/");
  CHECK(remapped(o, "AUTH_a.example.com:8080", "/c/o") == "/v1/AUTH_a/c/o");
  CHECK(remapped(o, "c.AUTH_a.example.com", "/o") == "/v1/AUTH_a/c/o");
  CHECK(remapped(o, "c.AUTH-a.example.com", "/o") == "/v1/AUTH_a/c/o");
  CHECK(remapped(o, "auth-a.example.com", "/") == "/v1/AUTH_a/");
  CHECK(remapped(o, "c.AUTH_a-b.example.com", "/") == "/v1/AUTH_a-b/c/");
  CHECK(remapped(o, "x.c.AUTH_a.example.com", "/") == "400");
  CHECK(remapped(o, "example.com", "/") == "pass");
  CHECK(remapped(o, "AUTH_a.example.org", "/") == "pass");
  CHECK(remapped(o, "AUTH_a.EXAMPLE.com", "/") == "pass");
  CHECK(remapped(o, "bob.example.com", "/") == "pass");  // no reseller prefix fits
  // The path is kept as sent unless mangle_client_paths.
  CHECK(remapped(o, "AUTH_a.example.com", "/v1/c") == "/v1/AUTH_a/v1/c");
}

TEST_CASE("domain_remap: options") {
  auto o = remap_options(
      "storage_domain = .storage.net, example.net\npath_root = /v2/\n"
      "reseller_prefixes = AUTH, SERVICE\ndefault_reseller_prefix = DEF\n"
      "mangle_client_paths = true\n");
  CHECK(o.storage_domains == std::vector<std::string>{".example.net", ".storage.net"});
  CHECK(o.path_root == "v2/");
  CHECK(remapped(o, "bob.example.net", "/c") == "/v2/DEF_bob/c");
  CHECK(remapped(o, "service-x.storage.net", "/") == "/v2/SERVICE_x/");
  CHECK(remapped(o, "AUTH_a.example.net", "/v2/c") == "/v2/AUTH_a/c");
  CHECK(remapped(o, "AUTH_a.example.net", "/v2") == "/v2/AUTH_a/");
  CHECK(remapped(o, "AUTH_a.example.net", "/v2x") == "/v2/AUTH_a/v2x");
  auto none = remap_options("reseller_prefixes =\n");
  CHECK(remapped(none, "anything-goes.example.com", "/") == "/v1/anything-goes/");
  auto empty = remap_options("storage_domain =\n");
  CHECK(remapped(empty, "AUTH_a.example.com", "/") == "pass");
}

TEST_CASE("domain_remap: the middleware rewrites the path and Location") {
  Fixture f;
  f.make("domain_remap", "storage_domain = example.net\n");
  CHECK(f.mw->info()->second == "{\"default_reseller_prefix\": null}");
  f.app_answer.headers.set("Location", "http://h:1/v1/AUTH_a/c/o%20x/more");
  Response r = f.run(make_req("GET", "/c/o%20x?format=json", hdrs({{"Host", "AUTH_a.example.net"}})));
  REQUIRE(f.passed);
  CHECK(f.passed->target == "/v1/AUTH_a/c/o%20x?format=json");
  CHECK(r.headers.get_or("Location", "") == "http://h:1/c/o%20x/more");
  r = f.run(make_req("GET", "/", hdrs({{"Host", "a.b.AUTH_a.example.net"}})));
  CHECK(r.status == 400);
  CHECK(r.body == "Bad domain in host header");
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  f.run(make_req("GET", "/c", hdrs({{"Host", "127.0.0.1:8080"}})));
  CHECK(f.passed->target == "/c");
  CHECK(domain_remap::rewrite_location("https://x/v1/a/c", "/v1/a", "/") == "https://x//c");
  CHECK(domain_remap::rewrite_location("ftp://x/v1/a/c", "/v1/a", "/") == "ftp://x/v1/a/c");
  CHECK(domain_remap::rewrite_location("http:///v1/a/c", "/v1/a", "/") == "http:///v1/a/c");
}

// ---- list_endpoints --------------------------------------------------------------------------

std::string parsed(std::string_view path) {
  auto t = list_endpoints::parse_path(path, "/endpoints/");
  if (!t.ok()) return "error: " + std::string(t.status().message());
  std::string out = "v" + std::to_string(t->version) + " " + t->account;
  if (t->container) out += " " + *t->container;
  if (t->object) out += " " + *t->object;
  return out;
}

TEST_CASE("list_endpoints: paths, versions and Swift's 400 bodies") {
  CHECK(parsed("/endpoints/a") == "v1 a");
  CHECK(parsed("/endpoints/a/c/o/x") == "v1 a c o/x");
  CHECK(parsed("/endpoints/v1/a/c") == "v1 a c");
  CHECK(parsed("/endpoints/v2/a/c/o") == "v2 a c o");
  CHECK(parsed("/endpoints/v2.0/a") == "v2 a");
  CHECK(parsed("/endpoints/vvv1/a") == "v1 a");
  CHECK(parsed("/endpoints/a%20b/c%2Fd") == "v1 a b c/d");
  CHECK(parsed("/endpoints/v3/a") == "error: Unsupported version 'v3'");
  CHECK(parsed("/endpoints/v2") == "error: No account specified");
  CHECK(parsed("/endpoints/") == "error: No account specified");
  CHECK(parsed("/endpoints/v_3/a") == "v1 v_3 a");  // an account, as Swift reads it
  CHECK(parsed("/endpoints/AUTH_test") == "v1 AUTH_test");
  CHECK(list_endpoints::v1_body({"http://1.2.3.4:6200/sda/1/a"}) ==
        "[\"http://1.2.3.4:6200/sda/1/a\"]");
  CHECK(list_endpoints::v1_body({}) == "[]");
  CHECK(list_endpoints::v2_body({"x", "y"}, std::nullopt) ==
        "{\"endpoints\": [\"x\", \"y\"], \"headers\": {}}");
  CHECK(list_endpoints::v2_body({}, std::string("1")) ==
        "{\"endpoints\": [], \"headers\": {\"X-Backend-Storage-Policy-Index\": \"1\"}}");
}

// ---- cname_lookup ----------------------------------------------------------------------------

TEST_CASE("cname_lookup: nameservers as Swift reads them") {
  auto ns = cname_lookup::parse_nameservers("127.0.0.2, 127.0.0.3:5353, [::1]:53, ::1, [fe80::1]");
  REQUIRE(ns.ok());
  REQUIRE(ns->size() == 5);
  CHECK((*ns)[0].ip == "127.0.0.2");
  CHECK((*ns)[0].port == 53);
  CHECK((*ns)[1].port == 5353);
  CHECK((*ns)[2].ip == "::1");
  CHECK((*ns)[3].ip == "::1");
  CHECK((*ns)[4].ip == "fe80::1");
  for (const char* bad : {"dns.example.com", "127.0.0.1:x", "[::1]x", "1.2.3.4:99999"}) {
    CHECK_MESSAGE(!cname_lookup::parse_nameservers(bad).ok(), bad);
  }
  CHECK(cname_lookup::parse_nameservers("")->empty());
}

// A DNS reply to a CNAME query for `qname` with the answer records `answers` (owner, type,
// ttl, target), names written without compression.
std::vector<unsigned char> dns_reply(const std::string& qname,
                                     std::vector<std::tuple<std::string, int, uint32_t, std::string>> answers) {
  std::vector<unsigned char> m = {0x12, 0x34, 0x81, 0x80, 0, 1, 0,
                                  static_cast<unsigned char>(answers.size()), 0, 0, 0, 0};
  auto name = [&](const std::string& n) {
    size_t start = 0;
    while (start < n.size()) {
      size_t dot = n.find('.', start);
      if (dot == std::string::npos) dot = n.size();
      m.push_back(static_cast<unsigned char>(dot - start));
      m.insert(m.end(), n.begin() + start, n.begin() + dot);
      start = dot + 1;
    }
    m.push_back(0);
  };
  name(qname);
  m.insert(m.end(), {0, 5, 0, 1});
  for (auto& [owner, type, ttl, target] : answers) {
    name(owner);
    m.insert(m.end(), {0, static_cast<unsigned char>(type), 0, 1,
                       static_cast<unsigned char>(ttl >> 24), static_cast<unsigned char>(ttl >> 16),
                       static_cast<unsigned char>(ttl >> 8), static_cast<unsigned char>(ttl)});
    std::vector<unsigned char> rdata;
    std::swap(rdata, m);
    name(target);
    std::swap(rdata, m);
    m.push_back(static_cast<unsigned char>(rdata.size() >> 8));
    m.push_back(static_cast<unsigned char>(rdata.size()));
    m.insert(m.end(), rdata.begin(), rdata.end());
  }
  return m;
}

TEST_CASE("cname_lookup: the CNAME of a reply, its TTL, and replies without one") {
  auto m = dns_reply("www.example.org", {{"www.example.org", 5, 300, "c.AUTH_a.example.com"},
                                         {"WWW.example.org.", 5, 100, "other.example.com"}});
  auto a = cname_lookup::parse_reply(m, "www.example.org");
  REQUIRE(a.target);
  CHECK(*a.target == "c.AUTH_a.example.com");
  CHECK(a.ttl == 100);
  m = dns_reply("www.example.org", {{"elsewhere.example.org", 5, 300, "x.example.com"}});
  a = cname_lookup::parse_reply(m, "www.example.org");
  CHECK(!a.target);
  CHECK(a.ttl == 60);
  m.resize(m.size() - 3);  // cut short
  a = cname_lookup::parse_reply(m, "www.example.org");
  CHECK(!a.target);
  CHECK(a.ttl == 0);
}

TEST_CASE("cname_lookup: hosts under a storage domain or IPs are not looked up") {
  Fixture f;
  f.make("cname_lookup", "storage_domain = example.com\nlookup_depth = 0\n");
  CHECK(f.mw->info()->second == "{\"lookup_depth\": 0}");
  CHECK(f.run(make_req("GET", "/", hdrs({{"Host", "c.AUTH_a.example.com:8080"}}))).status == 200);
  CHECK(f.run(make_req("GET", "/", hdrs({{"Host", "127.0.0.1:8080"}}))).status == 200);
  CHECK(f.run(make_req("GET", "/", hdrs({{"Host", "::1:8080"}}))).status == 200);  // "::1", port
  // Swift fails on lookup_depth 0 for any other name.
  CHECK(f.run(make_req("GET", "/", hdrs({{"Host", "www.example.org"}}))).status == 500);
}

}  // namespace
}  // namespace apus::proxy
