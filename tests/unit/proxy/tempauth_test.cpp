// tempauth without sockets: tokens and transaction ids come from the CSPRNG seam
// (common/crypto/random.h) in Swift's shapes, a 401's realm cannot carry the client's CR, LF or
// quote, and a service token adds the groups <prefix>_require_group asks for.
#include "proxy/middleware.h"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <cstring>
#include <string>

#include "common/config/config.h"
#include "common/crypto/random.h"
#include "proxy/pipeline.h"
#include "tests/unit/proxy/recording_exchange.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

// Every random byte is 0xab while it lives.
struct FixedRandom {
  static ssize_t fill(void* buf, size_t len, unsigned) {
    std::memset(buf, 0xab, len);
    return static_cast<ssize_t>(len);
  }
  FixedRandom() { common::crypto::set_getrandom_for_test(&fill); }
  ~FixedRandom() { common::crypto::set_getrandom_for_test(nullptr); }
};
// uuid4().hex of sixteen 0xab bytes: version nibble 4 at index 12, variant bits at index 16.
constexpr const char* kFixedUuid4 = "abababababab4bababababababababab";

using testing::RecordingExchange;

// Info lookups that find every account with no metadata.
class NoInfo final : public InfoLookup {
 public:
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
  std::unique_ptr<Middleware> tempauth;
  bool passed_on = false;

  Fixture() {
    auto conf = common::Config::parse(
        "[filter:tempauth]\nuse = egg:swift#tempauth\nreseller_prefix = AUTH, SERVICE\n"
        "SERVICE_require_group = service\nuser_test_tester = testing .admin\n"
        "user_test5_tester5 = testing5 service\n");
    REQUIRE(conf.ok());
    auto mw = make_tempauth(conf->section("filter:tempauth"),
                            MiddlewareContext{swift, swift_dir, info});
    REQUIRE(mw.ok());
    tempauth = std::move(*mw);
  }

  // Runs the request through tempauth; the response it sent, if any.
  std::optional<Response> run(Request req, ProxyEnv& env) {
    RecordingExchange ex(std::move(req));
    Next next = [this](common::http::Exchange&, ProxyEnv&) -> net::awaitable<void> {
      passed_on = true;
      co_return;
    };
    net::io_context ioc;
    auto done = net::co_spawn(ioc, tempauth->call(ex, env, next), net::use_future);
    ioc.run();
    done.get();
    return ex.response_;
  }

  std::string token(const std::string& user, const std::string& key) {
    Request req;
    req.method = "GET";
    req.target = "/auth/v1.0";
    req.headers.set("X-Auth-User", user);
    req.headers.set("X-Auth-Key", key);
    ProxyEnv env;
    auto r = run(std::move(req), env);
    REQUIRE(r);
    CHECK(r->status == 200);
    return std::string(r->headers.get_or("X-Auth-Token", ""));
  }
};

TEST_CASE("tempauth: a token is the first prefix, tk and uuid4().hex of the CSPRNG's bytes") {
  FixedRandom fixed;
  Fixture f;
  CHECK(f.token("test:tester", "testing") == std::string("AUTH_tk") + kFixedUuid4);
}

TEST_CASE("tempauth: trans ids are tx, uuid4().hex[:21] of the CSPRNG's bytes and the time") {
  FixedRandom fixed;
  std::string id = generate_trans_id("-extra");
  CHECK(id.substr(0, 24) == "tx" + std::string(kFixedUuid4).substr(0, 21) + "-");
  CHECK(id.size() == 2 + 21 + 1 + 10 + 6);
  CHECK(id.substr(34) == "-extra");
}

TEST_CASE("tempauth: the realm of a 401 is percent-encoded") {
  Fixture f;
  Request req;
  req.method = "GET";
  req.target = "/auth/v1/x%0d%0aSet-Cookie:%20a=%22b/auth";
  ProxyEnv env;
  auto r = f.run(req, env);
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(r->headers.get_or("Www-Authenticate", "") ==
        "Swift realm=\"x%0D%0ASet-Cookie%3A%20a%3D%22b\"");

  req.target = "/v1/AUTH_x%0d%0aX-Evil:%201/c";
  req.headers.set("X-Auth-Token", "AUTH_tkbogus");
  ProxyEnv env2;
  r = f.run(req, env2);
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(r->headers.get_or("Www-Authenticate", "") ==
        "Swift realm=\"AUTH_x%0D%0AX-Evil%3A%201\"");
  CHECK_FALSE(f.passed_on);
}

TEST_CASE("tempauth: a service token adds the group SERVICE_require_group asks for") {
  Fixture f;
  std::string user = f.token("test:tester", "testing");
  std::string service = f.token("test5:tester5", "testing5");
  Request req;
  req.method = "POST";
  req.target = "/v1/SERVICE_test";
  req.headers.set("X-Auth-Token", user);
  req.headers.set("X-Service-Token", service);
  ProxyEnv env;
  CHECK_FALSE(f.run(req, env));
  CHECK(f.passed_on);
  // Swift's _get_user_groups() order: the user, .admin's accounts under every prefix, then
  // the service user's groups.
  CHECK(env.remote_user == "test,test:tester,AUTH_test,SERVICE_test,test5,test5:tester5,service");
  REQUIRE(env.authorize);
  net::io_context ioc;
  auto decision = net::co_spawn(ioc, env.authorize(req, env), net::use_future);
  ioc.run();
  CHECK_FALSE(decision.get().has_value());
  CHECK(env.swift_owner);
}

}  // namespace
}  // namespace apus::proxy

namespace apus::proxy {
namespace {

TEST_CASE_FIXTURE(Fixture, "tempauth: a trailing slash names no object, as Swift reads it") {
  // Anonymous readers of a .r:* container may read objects, and list it only with .rlistings,
  // whether the listing is asked for as /c or /c/.
  Request req;
  req.method = "GET";
  ProxyEnv env;
  req.target = "/v1/AUTH_test/c";
  (void)run(req, env);
  REQUIRE(env.authorize);
  auto decide = [&](std::string target, std::string acl) {
    Request r;
    r.method = "GET";
    r.target = std::move(target);
    ProxyEnv e = env;
    e.acl = std::move(acl);
    std::optional<Response> out;
    net::io_context ioc;
    auto done = net::co_spawn(
        ioc,
        [&]() -> net::awaitable<void> { out = co_await e.authorize(r, e); },
        net::use_future);
    ioc.run();
    done.get();
    return out ? out->status : 0;
  };
  CHECK(decide("/v1/AUTH_test/c/o", ".r:*") == 0);
  CHECK(decide("/v1/AUTH_test/c", ".r:*") == 401);
  CHECK(decide("/v1/AUTH_test/c/", ".r:*") == 401);
  CHECK(decide("/v1/AUTH_test/c/", ".r:*,.rlistings") == 0);
}

}  // namespace
}  // namespace apus::proxy
