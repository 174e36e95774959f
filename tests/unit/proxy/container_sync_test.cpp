// container_sync without sockets: requests run through the middleware on a recording exchange,
// with a realms file in a temp dir and scripted container info; signatures are ones Swift
// 2.30.1's ContainerSyncRealms.get_sig() made. Also slo's and symlink's overrides, which a valid
// sync request turns on.
#include "proxy/container_sync.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "proxy/middleware.h"
#include "proxy/pipeline.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/proxy/recording_exchange.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

// get_sig('PUT', '/v1/AUTH_a/c/o%20x', '1700000000.00000', 'abc-nonce', <key>, 'userkey').
constexpr const char* kSigKey = "974b97e84c8c0e01bade22e0e306d40104765815";    // realmkey
constexpr const char* kSigKey2 = "90fa9cca2e4e02dafe055e628d966cab0710ef2e";   // realmkey2
// get_sig('DELETE', '/v1/AUTH_a/c/o', '0', 'n', 'realmkey', 'userkey').
constexpr const char* kSigNoTimestamp = "af241ec460a3930078ea1f47334151154ba5cb0f";
// get_sig('PUT', '/v1/AUTH_a/c/o', '0', 'n\xe9', 'realmkey', 'userkey'): the nonce byte 0xe9
// as WSGI hands it over (latin-1 text), signed as UTF-8.
constexpr const char* kSigLatin1Nonce = "2b94456c23b81ef9a1022f7e6919d668b2935a1b";
constexpr const char* kUnauthorizedBody =
    "X-Container-Sync-Auth header not valid; contact cluster operator for support.";

using testing::RecordingExchange;

class ScriptedInfo final : public InfoLookup {
 public:
  CachedInfo container{200, {}, {}};
  std::vector<std::string> asked;

  net::awaitable<CachedInfo> account_info(const std::string& a, const Request&,
                                          const ProxyEnv&) override {
    asked.push_back("a:" + a);
    co_return CachedInfo{200, {}, {}};
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

constexpr const char* kRealms =
    "[DEFAULT]\nmtime_check_interval = 0\n"
    "[Realm1]\nkey = realmkey\nkey2 = realmkey2\n"
    "cluster_Clust1 = http://127.0.0.1:8080/v1/\ncluster_clust2 = http://127.0.0.2:8080/v1/\n"
    "[realm2]\nkey = otherkey\ncluster_c3 = http://127.0.0.3/v1/\n"
    "[nokey]\ncluster_c4 = http://127.0.0.4/v1/\n"
    "[noclusters]\nkey = k\n";

struct Fixture {
  test::TempDir dir{"apus_container_sync"};
  common::SwiftConf swift;
  ScriptedInfo info;
  std::unique_ptr<Middleware> mw;
  std::vector<Request> passed;  // every request the rest of the pipeline got
  ProxyEnv passed_env;           // the env of the last one
  Response app_answer{200, "", {}, "app"};
  Response head_answer{200, "", {}, ""};  // for HEAD subrequests (symlink's target check)

  Fixture() {
    write_realms(kRealms);
    info.container.headers.set("X-Container-Sync-Key", "userkey");
  }

  void write_realms(const std::string& text) {
    std::ofstream(dir.path("container-sync-realms.conf")) << text;
  }

  void make(std::string_view entry = "container_sync", std::string options = "") {
    auto conf = common::Config::parse("[DEFAULT]\nswift_dir = " + dir.root() +
                                      "\n[filter:x]\nuse = egg:swift#" + std::string(entry) +
                                      "\n" + options);
    REQUIRE(conf.ok());
    const std::string swift_dir = "/nonexistent";
    auto built = make_middleware(entry, conf->section("filter:x"),
                                 MiddlewareContext{swift, swift_dir, info});
    REQUIRE_MESSAGE(built.ok(), built.status().to_string());
    mw = std::move(*built);
  }

  Response run(Request req, ProxyEnv& env) {
    passed.clear();
    RecordingExchange ex(std::move(req));
    Next next = [this](common::http::Exchange& e, ProxyEnv& sub) -> net::awaitable<void> {
      passed.push_back(e.request());
      passed_env = sub;
      co_await e.reply(e.request().method == "HEAD" ? head_answer : app_answer);
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

  std::string info_json() {
    auto sections = mw->info_sections();
    REQUIRE(sections.size() == 1);
    CHECK(sections[0].first == "container_sync");
    return sections[0].second;
  }
};

Request make_req(std::string method, std::string target, HeaderMap headers = {}) {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.headers = std::move(headers);
  return r;
}

HeaderMap hdrs(std::initializer_list<std::pair<const char*, const char*>> list) {
  HeaderMap h;
  for (auto [k, v] : list) h.set(k, v);
  return h;
}

// A sync PUT of /v1/AUTH_a/c/o%20x as gatekeeper hands it on (its X-Timestamp set aside).
Request sync_put(std::string auth) {
  return make_req("PUT", "/v1/AUTH_a/c/o%20x",
                  hdrs({{"X-Container-Sync-Auth", auth.c_str()},
                        {"X-Backend-Inbound-X-Timestamp", "1700000000.00000"}}));
}

void check_refused(const Response& r, const ProxyEnv& env, std::string_view log_entry,
                   const Fixture& f) {
  CHECK(r.status == 401);
  CHECK(r.body == kUnauthorizedBody);
  CHECK(r.headers.get_or("Content-Type", "") == "text/plain");
  CHECK(r.headers.get_or("Www-Authenticate", "") == "SwiftContainerSync realm=\"AUTH_a\"");
  CHECK(env.log_info.count(std::string(log_entry)) == 1);
  CHECK(env.log_info.count("cs:valid") == 0);
  CHECK(!env.authorize_override);
  CHECK(!env.slo_override);
  CHECK(!env.symlink_override);
  CHECK(f.passed.empty());
}

// ---- signatures ------------------------------------------------------------------------------

TEST_CASE("container_sync: a signature under the realm's key passes with the sync's timestamp") {
  Fixture f;
  f.make();
  ProxyEnv env;
  Response r = f.run(sync_put(std::string("realm1 abc-nonce ") + kSigKey), env);
  CHECK(r.status == 200);
  REQUIRE(f.passed.size() == 1);
  CHECK(f.passed[0].headers.get_or("X-Timestamp", "") == "1700000000.00000");
  CHECK(!f.passed[0].headers.contains("X-Backend-Inbound-X-Timestamp"));
  CHECK(env.authorize_override);
  CHECK(env.slo_override);
  CHECK(env.symlink_override);
  CHECK(env.log_info.count("cs:valid") == 1);
  CHECK(f.info.asked == std::vector<std::string>{"c:AUTH_a/c"});
}

TEST_CASE("container_sync: a signature under key2 passes too, and names compare in any case") {
  Fixture f;
  f.make();
  ProxyEnv env;
  CHECK(f.run(sync_put(std::string("REALM1 abc-nonce ") + kSigKey2), env).status == 200);
  CHECK(env.authorize_override);
  CHECK(f.passed.size() == 1);
  // Tabs and runs of spaces separate the words, as Python's split() has it.
  ProxyEnv env2;
  CHECK(f.run(sync_put(std::string("  Realm1\tabc-nonce   ") + kSigKey + " "), env2).status ==
        200);
  CHECK(env2.log_info.count("cs:valid") == 1);
}

TEST_CASE("container_sync: a wrong signature is 401 cs:invalid-sig") {
  Fixture f;
  f.make();
  ProxyEnv env;
  std::string bad = kSigKey;
  bad[0] = bad[0] == '0' ? '1' : '0';
  Response r = f.run(sync_put("realm1 abc-nonce " + bad), env);
  check_refused(r, env, "cs:invalid-sig", f);
  // Signed for another realm's key, another nonce, another path, another timestamp.
  for (Request req : {sync_put(std::string("realm2 abc-nonce ") + kSigKey),
                      sync_put(std::string("realm1 other-nonce ") + kSigKey),
                      make_req("PUT", "/v1/AUTH_a/c/o",
                               hdrs({{"X-Container-Sync-Auth",
                                      (std::string("realm1 abc-nonce ") + kSigKey).c_str()},
                                     {"X-Backend-Inbound-X-Timestamp", "1700000000.00000"}})),
                      make_req("PUT", "/v1/AUTH_a/c/o%20x",
                               hdrs({{"X-Container-Sync-Auth",
                                      (std::string("realm1 abc-nonce ") + kSigKey).c_str()},
                                     {"X-Backend-Inbound-X-Timestamp", "1700000000.00001"}}))}) {
    ProxyEnv e;
    check_refused(f.run(req, e), e, "cs:invalid-sig", f);
  }
  // The method is signed too.
  Request del = sync_put(std::string("realm1 abc-nonce ") + kSigKey);
  del.method = "DELETE";
  ProxyEnv e;
  check_refused(f.run(del, e), e, "cs:invalid-sig", f);
}

TEST_CASE("container_sync: an unknown realm, or one without a key, is 401 cs:no-local-realm-key") {
  Fixture f;
  f.make();
  for (const char* realm : {"nope", "nokey", "noclusters-typo"}) {
    ProxyEnv env;
    Response r = f.run(sync_put(std::string(realm) + " abc-nonce " + kSigKey), env);
    check_refused(r, env, "cs:no-local-realm-key", f);
  }
  CHECK(f.info.asked.empty());  // no container info needed to refuse it
}

TEST_CASE("container_sync: a container without a sync key is 401 cs:no-local-user-key") {
  Fixture f;
  f.make();
  f.info.container.headers.erase("X-Container-Sync-Key");
  ProxyEnv env;
  check_refused(f.run(sync_put(std::string("realm1 abc-nonce ") + kSigKey), env), env,
                "cs:no-local-user-key", f);
  f.info.container = CachedInfo{404, {}, {}};
  ProxyEnv env2;
  check_refused(f.run(sync_put(std::string("realm1 abc-nonce ") + kSigKey), env2), env2,
                "cs:no-local-user-key", f);
}

TEST_CASE("container_sync: anything but three words is 401 cs:not-3-args") {
  Fixture f;
  f.make();
  for (std::string auth : {std::string("realm1 abc-nonce"), std::string("realm1"),
                           std::string("   "), "realm1 abc-nonce " + std::string(kSigKey) + " x"}) {
    ProxyEnv env;
    check_refused(f.run(sync_put(auth), env), env, "cs:not-3-args", f);
  }
  // The account named in the challenge is the request's, quoted; v1.0 and auth are unknown.
  ProxyEnv env;
  Response r = f.run(make_req("GET", "/v1/AUTH_a%20b/c", hdrs({{"X-Container-Sync-Auth", "x"}})),
                     env);
  CHECK(r.headers.get_or("Www-Authenticate", "") == "SwiftContainerSync realm=\"AUTH_a%20b\"");
  r = f.run(make_req("GET", "/v1/v1.0/c", hdrs({{"X-Container-Sync-Auth", "x"}})), env);
  CHECK(r.headers.get_or("Www-Authenticate", "") == "SwiftContainerSync realm=\"unknown\"");
}

TEST_CASE("container_sync: no X-Timestamp signs 0, and the request goes on without one") {
  Fixture f;
  f.make();
  ProxyEnv env;
  Response r = f.run(make_req("DELETE", "/v1/AUTH_a/c/o",
                              hdrs({{"X-Container-Sync-Auth",
                                     (std::string("realm1 n ") + kSigNoTimestamp).c_str()}})),
                     env);
  CHECK(r.status == 200);
  REQUIRE(f.passed.size() == 1);
  CHECK(!f.passed[0].headers.contains("X-Timestamp"));
}

TEST_CASE("container_sync: the path is signed as Swift quotes it, the nonce as UTF-8") {
  Fixture f;
  f.make();
  // %7E and ~ are the same path to Swift, quoted as ~; %20 stays.
  Request req = sync_put(std::string("realm1 abc-nonce ") + kSigKey);
  req.target = "/v1/AUTH_%61/c/o%20%78";
  CHECK(f.run(req).status == 200);
  std::string auth = std::string("realm1 n\xe9 ") + kSigLatin1Nonce;
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", hdrs({{"X-Container-Sync-Auth", auth.c_str()}})))
            .status == 200);
  // A timestamp that is not ASCII fails Swift's signing: its catch_errors answers 500.
  Response r = f.run(make_req("PUT", "/v1/AUTH_a/c/o",
                              hdrs({{"X-Container-Sync-Auth", auth.c_str()},
                                    {"X-Backend-Inbound-X-Timestamp", "1\xe9"}})));
  CHECK(r.status == 500);
  CHECK(r.body == "An error occurred");
  CHECK(f.passed.empty());
}

TEST_CASE("container_sync: requests without the header, and other paths, pass untouched") {
  Fixture f;
  f.make();
  for (const char* target : {"/v1/AUTH_a/c/o", "/v1/AUTH_a/c", "/v1/AUTH_a", "/info",
                             "/v2/AUTH_a/c/o", "/auth/v1.0"}) {
    CAPTURE(target);
    ProxyEnv env;
    Response r = f.run(make_req("PUT", target,
                                hdrs({{"X-Backend-Inbound-X-Timestamp", "1700000000.00000"}})),
                       env);
    CHECK(r.status == 200);
    REQUIRE(f.passed.size() == 1);
    CHECK(!f.passed[0].headers.contains("X-Timestamp"));
    CHECK(f.passed[0].headers.get_or("X-Backend-Inbound-X-Timestamp", "") == "1700000000.00000");
    CHECK(!env.authorize_override);
    CHECK(!env.slo_override);
    CHECK(!env.symlink_override);
    CHECK(env.log_info.empty());
  }
  // A signature header outside /v1/<account>/<container>[/<object>] is not looked at.
  for (const char* target : {"/v1/AUTH_a", "/info", "/v2/AUTH_a/c/o"}) {
    CAPTURE(target);
    ProxyEnv env;
    CHECK(f.run(make_req("GET", target, hdrs({{"X-Container-Sync-Auth", "x"}})), env).status ==
          200);
    CHECK(!env.authorize_override);
  }
  // An empty header is no header.
  CHECK(f.run(make_req("GET", "/v1/AUTH_a/c/o", hdrs({{"X-Container-Sync-Auth", ""}}))).status ==
        200);
  CHECK(f.info.asked.empty());
}

// ---- X-Container-Sync-To ---------------------------------------------------------------------

TEST_CASE("container_sync: no sync on a container with object versioning") {
  Fixture f;
  f.make();
  f.info.container.headers.set("X-Container-Sysmeta-Versions-Container", "\x01versions\x01c");
  for (const char* method : {"PUT", "POST"}) {
    Response r = f.run(
        make_req(method, "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", "//realm1/clust1/a/c"}})));
    CHECK(r.status == 400);
    CHECK(r.body ==
          "Cannot configure container sync on a container with object versioning configured.");
    CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
    CHECK(f.passed.empty());
  }
  // Not for objects, other methods, or an empty value; legacy versioned_writes is fine.
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", hdrs({{"X-Container-Sync-To", "//r/c/a/c"}})))
            .status == 200);
  CHECK(f.run(make_req("GET", "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", "//r/c/a/c"}})))
            .status == 200);
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", ""}}))).status ==
        200);
  f.info.container.headers.erase("X-Container-Sysmeta-Versions-Container");
  f.info.container.headers.set("X-Container-Sysmeta-Versions-Location", "old");
  CHECK(f.run(make_req("POST", "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", "//r/c/a/c"}})))
            .status == 200);
}

TEST_CASE("container_sync: allow_full_urls = false refuses full URLs") {
  Fixture f;
  f.make("container_sync", "allow_full_urls = no\n");
  const std::string body =
      "Full URLs are not allowed for X-Container-Sync-To values. Only realm values of the format "
      "//realm/cluster/account/container are allowed.\n";
  for (const char* method : {"PUT", "POST"}) {
    Response r = f.run(make_req(method, "/v1/AUTH_a/c",
                                hdrs({{"X-Container-Sync-To", "http://127.0.0.1/v1/a/c"}})));
    CHECK(r.status == 400);
    CHECK(r.body == body);
    CHECK(f.passed.empty());
  }
  // Any request carrying one, as in Swift.
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c/o", hdrs({{"X-Container-Sync-To", "x"}}))).status ==
        400);
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", "//r/c/a/c"}})))
            .status == 200);
  CHECK(f.run(make_req("PUT", "/v1/AUTH_a/c", hdrs({{"X-Container-Sync-To", ""}}))).status ==
        200);
  // The default allows them; anything not true-like is false, as config_true_value reads it.
  Fixture g;
  g.make();
  CHECK(g.run(make_req("PUT", "/v1/AUTH_a/c",
                       hdrs({{"X-Container-Sync-To", "http://127.0.0.1/v1/a/c"}})))
            .status == 200);
  Fixture h;
  h.make("container_sync", "allow_full_urls = maybe\n");
  CHECK(h.run(make_req("PUT", "/v1/AUTH_a/c",
                       hdrs({{"X-Container-Sync-To", "http://127.0.0.1/v1/a/c"}})))
            .status == 400);
}

// ---- /info -----------------------------------------------------------------------------------

TEST_CASE("container_sync: /info lists realms with clusters, the current one marked") {
  Fixture f;
  f.make("container_sync", "current = //realm1/CLUST2\n");
  boost::json::value v = boost::json::parse(f.info_json());
  CHECK(v == boost::json::parse(R"({"realms": {
      "REALM1": {"clusters": {"CLUST1": {}, "CLUST2": {"current": true}}},
      "REALM2": {"clusters": {"C3": {}}},
      "NOKEY": {"clusters": {"C4": {}}}}})"));
  // Read again for each /info: a changed file shows at once (mtime_check_interval = 0 here).
  f.write_realms("[DEFAULT]\nmtime_check_interval = 0\n[solo]\nkey = k\ncluster_x = http://h/v1/\n");
  // The mtime must differ from the first file's.
  std::filesystem::last_write_time(
      f.dir.path("container-sync-realms.conf"),
      std::filesystem::file_time_type::clock::now() + std::chrono::seconds(5));
  CHECK(boost::json::parse(f.info_json()) ==
        boost::json::parse(R"({"realms": {"SOLO": {"clusters": {"X": {}}}}})"));
}

TEST_CASE("container_sync: bad or unknown current values mark nothing") {
  for (const char* current : {"//realm1", "//realm1/clust1/x", "///", "//realm1/nope",
                              "//nope/clust1", "realm1//clust1"}) {
    CAPTURE(current);
    Fixture f;
    f.make("container_sync", std::string("current = ") + current + "\n");
    CHECK(f.info_json().find("current") == std::string::npos);
  }
  // Without slashes around it is still read, as Swift strips them.
  Fixture f;
  f.make("container_sync", "current = realm1/clust1/\n");
  CHECK(f.info_json().find("\"CLUST1\": {\"current\": true}") != std::string::npos);
  // No realms file: no realms.
  Fixture g;
  std::filesystem::remove(g.dir.path("container-sync-realms.conf"));
  g.make();
  CHECK(g.info_json() == "{\"realms\": {}}");
}

// ---- what the overrides do to slo and symlink --------------------------------------------------

TEST_CASE("slo: with slo_override a manifest PUT passes as it is") {
  Fixture f;
  f.make("slo");
  Request put = make_req("PUT", "/v1/AUTH_a/c/m", hdrs({{"X-Static-Large-Object", "True"}}));
  CHECK(f.run(put).status == 400);  // reserved header without the override
  CHECK(f.passed.empty());
  ProxyEnv env;
  env.slo_override = true;
  CHECK(f.run(put, env).status == 200);
  REQUIRE(f.passed.size() == 1);
  CHECK(f.passed[0].headers.get_or("X-Static-Large-Object", "") == "True");
  // ?multipart-manifest=put is not validated either (its body would be the client's format).
  put.target += "?multipart-manifest=put";
  CHECK(f.run(put, env).status == 200);
  REQUIRE(f.passed.size() == 1);
  CHECK(f.passed[0].target == "/v1/AUTH_a/c/m?multipart-manifest=put");
}

TEST_CASE("symlink: with symlink_override a static link keeps the ETag and size it was sent") {
  Fixture f;
  f.make("symlink");
  HeaderMap h = hdrs({{"X-Symlink-Target", "c/target"},
                      {"X-Symlink-Target-Etag", "\"0123456789abcdef0123456789abcdef\""},
                      {"X-Symlink-Target-Bytes", "1234"}});
  Request put = make_req("PUT", "/v1/AUTH_a/c/link", h);
  put.content_length = 0;
  // Without the override the target is looked at first (and here it differs).
  f.head_answer.headers.set("Etag", "ffffffffffffffffffffffffffffffff");
  f.head_answer.headers.set("Content-Length", "99");
  Response r = f.run(put);
  CHECK(r.status == 409);
  REQUIRE(f.passed.size() == 1);
  CHECK(f.passed[0].method == "HEAD");
  ProxyEnv env;
  env.symlink_override = true;
  r = f.run(put, env);
  CHECK(r.status == 200);
  REQUIRE(f.passed.size() == 1);
  const HeaderMap& sent = f.passed[0].headers;
  CHECK(f.passed[0].method == "PUT");
  CHECK(sent.get_or("X-Object-Sysmeta-Symlink-Target-Etag", "") ==
        "0123456789abcdef0123456789abcdef");
  CHECK(sent.get_or("X-Object-Sysmeta-Symlink-Target-Bytes", "") == "1234");
  CHECK(sent.get_or("X-Object-Sysmeta-Symlink-Target", "") == "c/target");
  CHECK(sent.get_or("X-Object-Sysmeta-Container-Update-Override-Etag", "")
            .find("symlink_target_etag=0123456789abcdef0123456789abcdef; "
                  "symlink_target_bytes=1234") != std::string_view::npos);
  // Without X-Symlink-Target-Bytes Swift's symlink fails (a KeyError caught by catch_errors).
  put.headers.erase("X-Symlink-Target-Bytes");
  r = f.run(put, env);
  CHECK(r.status == 500);
  CHECK(f.passed.empty());
  // A dynamic link is unaffected.
  put.headers.erase("X-Symlink-Target-Etag");
  CHECK(f.run(put, env).status == 200);
  REQUIRE(f.passed.size() == 1);
  CHECK(!f.passed[0].headers.contains("X-Object-Sysmeta-Symlink-Target-Etag"));
}

}  // namespace
}  // namespace apus::proxy
