// tempurl (proxy/tempurl.h) and the shared signature code (proxy/digest.h). The HMAC vectors
// were computed with Python 3.11's hmac module; the parsing answers are those of Swift 2.30.1's
// functions (digest.extract_digest_and_algorithm, tempurl's expiry normalization).
#include "proxy/tempurl.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <limits>
#include <map>

#include <doctest/doctest.h>

#include "common/http/date.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/digest.h"
#include "proxy/subrequest.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

// hmac.new(b"mykey", b"GET\n1700000000\n/v1/AUTH_test/c/o", d)
constexpr std::string_view kBody = "GET\n1700000000\n/v1/AUTH_test/c/o";
constexpr std::string_view kSha1 = "3994d403a1e371c61672cc49d49e3504805f4887";
constexpr std::string_view kSha256 =
    "7d8e44a645aab88cf197df39a844fc98555dad169375805007f6e9b55a5c9370";
constexpr std::string_view kSha512 =
    "1cc2a33fe5b1a4189352241e357eb4137852acf7b9dbd7ab04803fad3acabd2c8c47ff30f46792ed8ff0dda0f39"
    "90cc8bffcf41791c180a9f13e72cf2d42eb34";

TEST_CASE("digest: HMAC-SHA1, SHA256 and SHA512 as Python's hmac module gives them") {
  CHECK(digest::hmac_hex("sha1", "mykey", kBody) == kSha1);
  CHECK(digest::hmac_hex("sha256", "mykey", kBody) == kSha256);
  CHECK(digest::hmac_hex("sha512", "mykey", kBody) == kSha512);
  CHECK(digest::temp_url_hmac("sha256", "GET", "1700000000", "/v1/AUTH_test/c/o", "mykey") ==
        kSha256);
  // hmac.new(b"mykey", b"ip=127.0.0.0/8\nPUT\n1700000000\nprefix:/v1/AUTH_test/c/pre", sha256)
  CHECK(digest::temp_url_hmac("sha256", "PUT", "1700000000", "prefix:/v1/AUTH_test/c/pre",
                              "mykey", "127.0.0.0/8") ==
        "61b62c765c657b6cf2e4afaf55245e61ced530a4d126e2defe11f803d2196c45");
  // An empty key: hmac.new(b"", b"x", sha1)
  CHECK(digest::hmac_hex("sha1", "", "x") == "6244e66451a1c8695db9731ce2c4fd5de25ccf87");
}

TEST_CASE("digest: signatures in hex and in <digest>:<base64>") {
  auto e = [](std::string_view v) { return digest::extract_digest_and_algorithm(v); };
  REQUIRE(e(kSha1));
  CHECK(e(kSha1)->algorithm == "sha1");
  CHECK(e(kSha256)->algorithm == "sha256");
  CHECK(e(kSha512)->algorithm == "sha512");
  CHECK(e(kSha512)->hex == kSha512);
  // The three base64 spellings of the same SHA-256 and SHA-512 digests.
  for (std::string_view v : {"sha256:fY5EpkWquIzxl985qET8mFVdrRaTdYBQB/bptVpck3A=",
                             "sha256:fY5EpkWquIzxl985qET8mFVdrRaTdYBQB/bptVpck3A",
                             "sha256:fY5EpkWquIzxl985qET8mFVdrRaTdYBQB_bptVpck3A="}) {
    REQUIRE_MESSAGE(e(v), v);
    CHECK(e(v)->algorithm == "sha256");
    CHECK(e(v)->hex == kSha256);
  }
  auto b512 = e("sha512:HMKjP-WxpBiTUiQeNX60E3hSrPe529erBIA_rTrKvSyMR_8w9GeS7Y_w3aDzmQzIv_z0F5HBg"
                "KnxPnLPLULrNA==");
  REQUIRE(b512);
  CHECK(b512->hex == kSha512);
  // Hex keeps its case (and so never matches when upper-cased); other lengths are refused.
  CHECK(e(std::string(64, 'A'))->hex == std::string(64, 'A'));
  CHECK(!e(std::string(41, 'a')));
  CHECK(!e(std::string(42, 'a')));
  CHECK(!e(std::string(40, 'g')));
  CHECK(!e("ABCD"));
  CHECK(!e(""));
  // Swift's answers for odd base64: extract_digest_and_algorithm() in Swift 2.30.1.
  CHECK(e("sha256:")->hex == "");
  CHECK(e("sha256:=")->hex == "");
  CHECK(e("sha256:AA")->hex == "00");
  CHECK(e("sha256:AAA")->hex == "0000");
  CHECK(e("sha256:AAAA===")->hex == "000000");
  CHECK(e("x:==AB==")->hex == "00");
  CHECK(e("x:==AB==")->algorithm == "x");
  CHECK(e("x:-_")->hex == "fb");
  CHECK(!e("sha256:A"));
  CHECK(!e("x:A=B"));
  CHECK(!e("x:-_+"));
  CHECK(!e("sha256:AA AA"));  // a '+' the query read as a space
}

TEST_CASE("digest: allowed_digests and constant-time comparison") {
  auto all = digest::allowed_digests("");
  REQUIRE(all.ok());
  CHECK(all->allowed == std::vector<std::string>{"sha1", "sha256", "sha512"});
  CHECK(all->deprecated == std::vector<std::string>{"sha1"});
  std::vector<std::string> ignored;
  auto some = digest::allowed_digests("SHA512 md5 sha256", &ignored);
  REQUIRE(some.ok());
  CHECK(some->allowed == std::vector<std::string>{"sha256", "sha512"});
  CHECK(some->deprecated.empty());
  CHECK(ignored == std::vector<std::string>{"md5"});
  CHECK(!some->contains("sha1"));
  auto none = digest::allowed_digests("md5");
  REQUIRE(!none.ok());
  CHECK(none.status().message().find("No valid digest algorithms are configured") !=
        std::string::npos);
  CHECK(digest::streq_const_time("abc", "abc"));
  CHECK(!digest::streq_const_time("abc", "abd"));
  CHECK(!digest::streq_const_time("abc", "abcd"));
  CHECK(digest::streq_const_time("", ""));
}

TEST_CASE("tempurl: expiry as an integer or ISO 8601, as Swift normalizes it") {
  const double now = 1800000000.5;
  auto n = [now](std::string v) { return tempurl::normalize_expires(v, now)->value; };
  CHECK(!tempurl::normalize_expires(std::nullopt, now));
  CHECK(n("1900000000") == 1900000000);
  CHECK(n(" 1_900_000_000 ") == 1900000000);
  CHECK(n("+1900000000") == 1900000000);
  CHECK(n("1900000000.0") == 0);
  CHECK(n("-5") == 0);
  CHECK(n("1800000000") == 0);  // already past
  CHECK(n("1800000001") == 1800000001);
  CHECK(n("") == 0);
  CHECK(n("soon") == 0);
  // strptime's lenient widths and case; impossible dates refused (answers of Swift 2.30.1).
  CHECK(n("2030-1-5T1:2:3z") == 1893805323);
  CHECK(n("2030-01- 5T01:02:03Z") == 1893805323);
  CHECK(n("2030-02-30T00:00:00Z") == 0);
  CHECK(n("2030-02-29T00:00:00Z") == 0);
  CHECK(n("2028-02-29T00:00:00Z") == 1835395200);
  CHECK(n("2030-12-31T23:59:61Z") == 1924992001);
  CHECK(n("2030-12-31T24:00:00Z") == 0);
  CHECK(n("0000-01-01T00:00:00Z") == 0);
  CHECK(n("2030-01-05T01:02:03") == 0);
  CHECK(n("2030-001-05T01:02:03Z") == 0);
  CHECK(n("12030-01-05T01:02:03Z") == 0);
  // str() of what int() read is what the signature covers.
  auto big = tempurl::normalize_expires(std::string("0099999999999999999999999"), now);
  CHECK(big->text == "99999999999999999999999");
  CHECK(big->value == std::numeric_limits<int64_t>::max());
  CHECK(!tempurl::python_int("1__0"));
  CHECK(!tempurl::python_int("_1"));
  CHECK(!tempurl::python_int("+"));
  CHECK(tempurl::python_int("-0")->text == "0");
  CHECK(!tempurl::python_int(std::string(4301, '1')));
}

TEST_CASE("tempurl: the query as Python's parse_qs reads it") {
  auto q = tempurl::parse_query_info(
      "temp_url_sig=sha256:ab%2Bcd&temp_url_expires=1&filename=My+File%20x.pdf&inline&"
      "temp_url_sig=second&temp_url_prefix=&temp_url_ip_range=127.0.0.1");
  CHECK(q.sig == "sha256:ab+cd");  // the first value
  CHECK(q.expires == "1");
  CHECK(q.filename == "My File x.pdf");
  CHECK(q.inline_disposition);
  CHECK(q.prefix == "");
  CHECK(q.ip_range == "127.0.0.1");
  // A '+' not encoded is a space; bad UTF-8 becomes U+FFFD; raw Latin-1 bytes stay characters.
  CHECK(tempurl::parse_query_info("temp_url_sig=a+b").sig == "a b");
  CHECK(tempurl::parse_query_info("filename=%FFx").filename == "\xef\xbf\xbdx");
  CHECK(tempurl::parse_query_info("filename=%C3%A9").filename == "\xc3\xa9");
  CHECK(tempurl::parse_query_info("filename=\xe9").filename == "\xc3\xa9");
  CHECK(!tempurl::parse_query_info("a=b&&c").sig);
}

TEST_CASE("tempurl: temp_url_ip_range as Python's ipaddress reads it") {
  CHECK(tempurl::ip_in_range("127.0.0.1", "127.0.0.1"));
  CHECK(!tempurl::ip_in_range("127.0.0.1", "127.0.0.2"));
  CHECK(tempurl::ip_in_range("127.0.0.0/8", "127.1.2.3"));
  CHECK(tempurl::ip_in_range("127.0.0.0/255.0.0.0", "127.1.2.3"));
  CHECK(tempurl::ip_in_range("127.0.0.0/0.255.255.255", "127.1.2.3"));
  CHECK(tempurl::ip_in_range("0.0.0.0/0", "10.0.0.1"));
  CHECK(!tempurl::ip_in_range("127.0.0.1/8", "127.0.0.1"));  // host bits set
  CHECK(!tempurl::ip_in_range("127.0.0.01", "127.0.0.1"));   // leading zero
  CHECK(!tempurl::ip_in_range("127.0.0.0/33", "127.0.0.1"));
  CHECK(!tempurl::ip_in_range("127.0.0.0/8/8", "127.0.0.1"));
  CHECK(!tempurl::ip_in_range("nonsense", "127.0.0.1"));
  CHECK(tempurl::ip_in_range("::1", "::1"));
  CHECK(tempurl::ip_in_range("fe80::/64", "fe80::1"));
  CHECK(!tempurl::ip_in_range("fe80::/64", "127.0.0.1"));
  CHECK(!tempurl::ip_in_range("127.0.0.0/8", "::1"));
  CHECK(!tempurl::ip_in_range("fe80::1/64", "fe80::1"));
  CHECK(!tempurl::ip_in_range("127.0.0.1", ""));
}

TEST_CASE("tempurl: header rules, names and Content-Disposition") {
  CHECK(tempurl::python_title("x-object-meta-foo") == "X-Object-Meta-Foo");
  CHECK(tempurl::python_title("ETAG") == "Etag");
  CHECK(tempurl::python_title("x-2abc") == "X-2Abc");
  CHECK(tempurl::environ_key("X-Timestamp") == "HTTP_X_TIMESTAMP");
  CHECK(tempurl::environ_key("content-type") == "CONTENT_TYPE");
  CHECK(tempurl::environ_key("Content-Length") == "CONTENT_LENGTH");
  tempurl::HeaderRules in({"x-timestamp", "x-foo-*"}, {"x-foo-keep"}, true);
  CHECK(in.removes("X-Timestamp"));
  CHECK(in.removes("x-foo-bar"));
  CHECK(!in.removes("X-Foo-Keep"));
  CHECK(!in.removes("X-Foo"));
  CHECK(!in.removes("X-Object-Meta-A"));
  tempurl::HeaderRules out({"x-object-meta-*"}, {"x-object-meta-public-*"}, false);
  CHECK(out.removes("X-Object-Meta-Secret"));
  CHECK(out.removes("x-object-meta-secret"));
  CHECK(!out.removes("X-Object-Meta-Public-Thing"));
  CHECK(!out.removes("Content-Type"));
  tempurl::HeaderRules star({"*"}, {"content-type"}, true);
  CHECK(star.removes("X-Anything"));
  CHECK(!star.removes("Content-Type"));
  CHECK(tempurl::disposition_format("attachment", "My Test \"File\".pdf") ==
        "attachment; filename=\"My Test %22File%22.pdf\"; "
        "filename*=UTF-8''My%20Test%20%22File%22.pdf");
  CHECK(tempurl::disposition_format("inline", "a/b\xc3\xa9") ==
        "inline; filename=\"a/b%C3%A9\"; filename*=UTF-8''a/b%C3%A9");
  HeaderMap meta;
  meta.set("X-Account-Meta-Temp-Url-Key", "one");
  meta.set("x-account-meta-temp-url-key-2", "two");
  meta.set("X-Account-Meta-Temp-Url-Key-3", "three");
  meta.set("X-Container-Meta-Temp-Url-Key", "c");
  CHECK(tempurl::keys_from_headers(meta, "X-Account-Meta-") ==
        std::vector<std::string>{"one", "two"});
  CHECK(tempurl::keys_from_headers(meta, "X-Container-Meta-") == std::vector<std::string>{"c"});
}

TEST_CASE("tempurl: /info as Swift registers it") {
  auto conf = common::Config::parse("[filter:tempurl]\nuse = egg:swift#tempurl\n");
  REQUIRE(conf.ok());
  auto o = tempurl::parse_options(conf->section("filter:tempurl"));
  REQUIRE(o.ok());
  CHECK(tempurl::info_json(*o) ==
        "{\"methods\": [\"GET\", \"HEAD\", \"PUT\", \"POST\", \"DELETE\"], "
        "\"incoming_remove_headers\": [\"x-timestamp\"], \"incoming_allow_headers\": [], "
        "\"outgoing_remove_headers\": [\"x-object-meta-*\"], "
        "\"outgoing_allow_headers\": [\"x-object-meta-public-*\"], "
        "\"allowed_digests\": [\"sha1\", \"sha256\", \"sha512\"], "
        "\"deprecated_digests\": [\"sha1\"]}");
  conf = common::Config::parse(
      "[filter:tempurl]\nuse = egg:swift#tempurl\nmethods = GET\nallowed_digests = sha512\n");
  o = tempurl::parse_options(conf->section("filter:tempurl"));
  REQUIRE(o.ok());
  CHECK(tempurl::info_json(*o).find("\"methods\": [\"GET\"]") != std::string::npos);
  CHECK(tempurl::info_json(*o).find("\"allowed_digests\": [\"sha512\"]}") != std::string::npos);
  conf = common::Config::parse(
      "[filter:tempurl]\nuse = egg:swift#tempurl\nallowed_digests = md5\n");
  CHECK(!tempurl::parse_options(conf->section("filter:tempurl")).ok());
}

// ---- the middleware on a fake app ------------------------------------------------------------

template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

// Account and container metadata for the key lookups.
struct Keys : InfoLookup {
  HeaderMap account, container;
  net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                          const ProxyEnv&) override {
    CachedInfo i;
    i.status = 204;
    i.headers = account;
    co_return i;
  }
  net::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                            const Request&, const ProxyEnv&) override {
    CachedInfo i;
    i.status = 204;
    i.headers = container;
    co_return i;
  }
  net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

struct Fixture {
  Keys keys;
  std::unique_ptr<Middleware> mw;
  std::vector<Request> seen;
  std::vector<std::optional<Response>> decisions;  // what env.authorize said of each request
  Authorize last_authorize;                         // the callback the last request carried
  std::string remote_addr = "127.0.0.1";
  int64_t expires =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count() +
      3600;

  explicit Fixture(std::string conf = "") {
    keys.account.set("X-Account-Meta-Temp-Url-Key", "akey");
    keys.container.set("X-Container-Meta-Temp-Url-Key-2", "ckey");
    auto parsed = common::Config::parse("[filter:tempurl]\nuse = egg:swift#tempurl\n" + conf);
    REQUIRE(parsed.ok());
    common::SwiftConf swift;
    std::string dir = "/nonexistent";
    auto made = make_tempurl(parsed->section("filter:tempurl"),
                             MiddlewareContext{swift, dir, keys});
    REQUIRE(made.ok());
    mw = std::move(made.value());
  }

  // The app: records the request and the authorize decision, answers with object headers.
  Next app() {
    return [this](Exchange& ex, ProxyEnv& env) -> net::awaitable<void> {
      seen.push_back(ex.request());
      last_authorize = env.authorize;
      std::optional<Response> decision;
      if (env.authorize) decision = co_await env.authorize(ex.request(), env);
      decisions.push_back(std::move(decision));
      Response r;
      r.status = ex.request().method == "PUT" ? 201 : 200;
      r.headers.set("Content-Type", "text/plain");
      r.headers.set("X-Object-Meta-Secret", "s");
      r.headers.set("X-Object-Meta-Public-Color", "red");
      r.headers.set("etag", "abc");
      if (ex.request().method == "GET" || ex.request().method == "HEAD") r.body = "hello";
      co_return co_await ex.reply(std::move(r));
    };
  }

  Response call(std::string method, std::string path, std::string query, HeaderMap h = {}) {
    Next next = app();
    Next through = [this, &next](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, next); };
    Request req = make_subrequest(std::move(method), path, query, std::move(h));
    req.remote_addr = remote_addr;
    std::optional<common::Result<Response>> r;
    run([&]() -> net::awaitable<void> {
      r.emplace(co_await run_subrequest(through, std::move(req), ProxyEnv{}, 1 << 20));
    });
    REQUIRE(r->ok());
    return std::move(**r);
  }

  // Whether the callback the last signed request carried allows `method` on `path`.
  bool allowed(std::string method, std::string path) {
    REQUIRE(last_authorize);
    std::optional<Response> denied;
    run([&]() -> net::awaitable<void> {
      Request probe = make_subrequest(std::move(method), path, "", {});
      ProxyEnv env;
      denied = co_await last_authorize(probe, env);
    });
    if (denied) CHECK(denied->status == 401);
    return !denied;
  }

  std::string query(std::string_view method, std::string_view path, std::string_view key,
                    std::string_view digest = "sha256", std::string extra = "") {
    return "temp_url_sig=" +
           digest::temp_url_hmac(digest, method, std::to_string(expires), path, key) +
           "&temp_url_expires=" + std::to_string(expires) + extra;
  }
};

TEST_CASE_FIXTURE(Fixture, "tempurl: a signed GET passes with its scope, headers edited") {
  Response r =
      call("GET", "/v1/AUTH_a/c/dir/o.txt", query("GET", "/v1/AUTH_a/c/dir/o.txt", "akey"));
  CHECK(r.status == 200);
  CHECK(r.body == "hello");
  CHECK(!r.headers.contains("X-Object-Meta-Secret"));
  CHECK(r.headers.get_or("X-Object-Meta-Public-Color", "") == "red");
  CHECK(r.headers.get_or("Content-Disposition", "") ==
        "attachment; filename=\"o.txt\"; filename*=UTF-8''o.txt");
  CHECK(r.headers.get_or("Expires", "") == common::http::format_http_date(expires));
  REQUIRE(seen.size() == 1);
  // Only the temp URL's own fields go on, the sig in hex.
  CHECK(seen[0].query() ==
        "temp_url_sig=" +
            digest::temp_url_hmac("sha256", "GET", std::to_string(expires),
                                  "/v1/AUTH_a/c/dir/o.txt", "akey") +
            "&temp_url_expires=" + std::to_string(expires));
  CHECK(!decisions[0]);  // the account key allows its account
  // The account scope: another container of the account is allowed, another account is not.
  CHECK(allowed("GET", "/v1/AUTH_a/other/x"));
  CHECK(allowed("PUT", "/v1/AUTH_a/c/elsewhere"));
  CHECK(!allowed("GET", "/v1/AUTH_b/c/x"));
}

TEST_CASE_FIXTURE(Fixture, "tempurl: container keys are limited to their container") {
  Response r = call("GET", "/v1/AUTH_a/c/o", query("GET", "/v1/AUTH_a/c/o", "ckey"));
  CHECK(r.status == 200);
  REQUIRE(decisions.size() == 1);
  CHECK(!decisions[0]);
  CHECK(allowed("GET", "/v1/AUTH_a/c/other"));
  CHECK(!allowed("GET", "/v1/AUTH_a/c2/o"));
  CHECK(!allowed("GET", "/v1/AUTH_b/c/o"));
  // The same key in the account and the container: the account's scope wins, as in Swift.
  keys.account.set("X-Account-Meta-Temp-Url-Key", "ckey");
  CHECK(call("GET", "/v1/AUTH_a/c/o", query("GET", "/v1/AUTH_a/c/o", "ckey")).status == 200);
  CHECK(allowed("GET", "/v1/AUTH_a/c2/o"));
}

TEST_CASE_FIXTURE(Fixture, "tempurl: HEAD with a GET, PUT or POST signature, not the other way") {
  for (std::string_view m : {"GET", "PUT", "POST", "HEAD"}) {
    Response r = call("HEAD", "/v1/AUTH_a/c/o", query(m, "/v1/AUTH_a/c/o", "akey"));
    CHECK_MESSAGE(r.status == 200, m);
  }
  Response r = call("GET", "/v1/AUTH_a/c/o", query("HEAD", "/v1/AUTH_a/c/o", "akey"));
  CHECK(r.status == 401);
  CHECK(r.body == tempurl::kInvalidBody);
  CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  CHECK(r.headers.get_or("Www-Authenticate", "") == "Swift realm=\"unknown\"");
  r = call("PUT", "/v1/AUTH_a/c/o", query("GET", "/v1/AUTH_a/c/o", "akey"));
  CHECK(r.status == 401);
  CHECK(seen.size() == 4);
}

TEST_CASE_FIXTURE(Fixture, "tempurl: wrong key, wrong object, expired, bad digest: 401") {
  const std::string p = "/v1/AUTH_a/c/o";
  CHECK(call("GET", p, query("GET", p, "nope")).status == 401);
  CHECK(call("GET", "/v1/AUTH_a/c/o2", query("GET", p, "akey")).status == 401);
  CHECK(call("GET", p, query("GET", p, "akey", "sha1")).status == 200);
  CHECK(call("GET", p, query("GET", p, "akey", "sha512")).status == 200);
  expires -= 7200;
  Response r = call("GET", p, query("GET", p, "akey"));
  CHECK(r.status == 401);
  CHECK(r.body == tempurl::kInvalidBody);
  r = call("HEAD", p, query("GET", p, "akey"));
  CHECK(r.status == 401);
  CHECK(r.body.empty());
  expires += 7200;
  CHECK(call("GET", p, "temp_url_sig=abc").status == 401);
  CHECK(call("GET", p, "temp_url_expires=" + std::to_string(expires)).status == 401);
  CHECK(call("GET", p, query("GET", p, "akey") + "&temp_url_sig=x").status == 200);  // first wins
  // Not an object (or a container's root without a prefix signature): 401.
  CHECK(call("GET", "/v1/AUTH_a/c", query("GET", "/v1/AUTH_a/c", "akey")).status == 401);
  CHECK(call("GET", "/v1/AUTH_a/c/", query("GET", "/v1/AUTH_a/c/", "akey")).status == 401);
  // No keys at all.
  keys.account = {};
  keys.container = {};
  CHECK(call("GET", p, query("GET", p, "akey")).status == 401);
  CHECK(seen.size() == 3);
  // Requests without temp URL fields pass untouched.
  CHECK(call("GET", p, "format=json").status == 200);
  CHECK(seen.back().query() == "format=json");
}

TEST_CASE_FIXTURE(Fixture, "tempurl: prefix signatures") {
  auto prefixed = [this](std::string_view method, std::string_view prefix) {
    return "temp_url_sig=" +
           digest::temp_url_hmac("sha256", method, std::to_string(expires),
                                 "prefix:/v1/AUTH_a/c/" + std::string(prefix), "akey") +
           "&temp_url_expires=" + std::to_string(expires) + "&temp_url_prefix=" +
           common::http::quote(prefix, "");
  };
  CHECK(call("GET", "/v1/AUTH_a/c/pre/x", prefixed("GET", "pre/")).status == 200);
  CHECK(call("GET", "/v1/AUTH_a/c/pre/deeper/y", prefixed("GET", "pre/")).status == 200);
  CHECK(call("GET", "/v1/AUTH_a/c/other", prefixed("GET", "pre/")).status == 401);
  CHECK(call("GET", "/v1/AUTH_a/c/anything", prefixed("GET", "")).status == 200);
  // The container's root with an empty prefix reaches the app but is refused unless staticweb
  // answered it (Swift 2.35).
  Response r = call("GET", "/v1/AUTH_a/c", prefixed("GET", ""));
  CHECK(r.status == 401);
  CHECK(r.body == tempurl::kInvalidBody);
}

TEST_CASE_FIXTURE(Fixture, "tempurl: temp_url_ip_range is signed and checked") {
  const std::string p = "/v1/AUTH_a/c/o";
  auto ranged = [&](std::string_view range) {
    return "temp_url_sig=" +
           digest::temp_url_hmac("sha256", "GET", std::to_string(expires), p, "akey", range) +
           "&temp_url_expires=" + std::to_string(expires) + "&temp_url_ip_range=" +
           common::http::quote(range, "");
  };
  CHECK(call("GET", p, ranged("127.0.0.0/8")).status == 200);
  CHECK(call("GET", p, ranged("10.0.0.0/8")).status == 401);
  remote_addr = "10.1.2.3";
  CHECK(call("GET", p, ranged("10.0.0.0/8")).status == 200);
  // The range is part of the signature: a signature without it does not cover it.
  CHECK(call("GET", p, query("GET", p, "akey") + "&temp_url_ip_range=10.0.0.0/8").status == 401);
}

TEST_CASE_FIXTURE(Fixture, "tempurl: inline, filename and the headers a PUT may not carry") {
  const std::string p = "/v1/AUTH_a/c/o";
  Response r = call("GET", p, query("GET", p, "akey", "sha256", "&inline"));
  CHECK(r.headers.get_or("Content-Disposition", "") == "inline");
  r = call("GET", p, query("GET", p, "akey", "sha256", "&inline&filename=a+b.pdf"));
  CHECK(r.headers.get_or("Content-Disposition", "") ==
        "inline; filename=\"a b.pdf\"; filename*=UTF-8''a%20b.pdf");
  r = call("GET", p, query("GET", p, "akey", "sha256", "&filename=%C3%A9"));
  CHECK(r.headers.get_or("Content-Disposition", "") ==
        "attachment; filename=\"%C3%A9\"; filename*=UTF-8''%C3%A9");
  CHECK(seen.back().query().find("&filename=%C3%A9") != std::string::npos);
  for (std::string_view h : {"X-Object-Manifest", "X-Symlink-Target", "X-Copy-From"}) {
    HeaderMap headers;
    headers.set(h, "c/x");
    r = call("PUT", p, query("PUT", p, "akey"), headers);
    CHECK(r.status == 400);
    CHECK(r.body == "The header '" + std::string(h) + "' is not allowed in this tempurl");
  }
  HeaderMap headers;
  headers.set("X-Timestamp", "1");
  headers.set("X-Object-Meta-A", "b");
  const size_t before = seen.size();
  r = call("PUT", p, query("PUT", p, "akey"), headers);
  CHECK(r.status == 201);
  REQUIRE(seen.size() == before + 1);
  CHECK(!seen.back().headers.contains("X-Timestamp"));
  CHECK(seen.back().headers.contains("X-Object-Meta-A"));
  // PUT answers get no Content-Disposition or Expires.
  CHECK(!r.headers.contains("Content-Disposition"));
  CHECK(!r.headers.contains("Expires"));
}

TEST_CASE("tempurl: methods and the header options") {
  Fixture f("methods = GET\noutgoing_remove_headers = content-type\n"
            "incoming_remove_headers = x-object-meta-*\n"
            "incoming_allow_headers = x-object-meta-a\n");
  const std::string p = "/v1/AUTH_a/c/o";
  CHECK(f.call("PUT", p, f.query("PUT", p, "akey")).status == 401);
  HeaderMap h;
  h.set("X-Object-Meta-A", "1");
  h.set("X-Object-Meta-B", "2");
  Response r = f.call("GET", p, f.query("GET", p, "akey"), h);
  CHECK(r.status == 200);
  CHECK(!r.headers.contains("Content-Type"));
  CHECK(r.headers.contains("X-Object-Meta-Secret"));
  REQUIRE(!f.seen.empty());
  CHECK(f.seen.back().headers.contains("X-Object-Meta-A"));
  CHECK(!f.seen.back().headers.contains("X-Object-Meta-B"));
}

TEST_CASE("tempurl: path_prefix (Swift 2.30.1) goes in front of the signed path") {
  Fixture f("path_prefix = /swift/\n");
  const std::string p = "/v1/AUTH_a/c/o";
  CHECK(f.call("GET", p, f.query("GET", p, "akey")).status == 401);
  CHECK(f.call("GET", p, f.query("GET", "/swift" + p, "akey")).status == 200);
}

}  // namespace
}  // namespace apus::proxy
