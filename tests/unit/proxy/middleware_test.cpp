// The pipeline rules of proxy/middleware.h: Swift's required filters and where they go, and
// the headers a client may never send. The expected orders are what Swift 2.30.1's
// modify_wsgi_pipeline() makes of the same pipelines.
#include "proxy/middleware.h"

#include <doctest/doctest.h>

#include <iterator>
#include <sstream>

#include "common/config/config.h"

namespace apus::proxy {
namespace {

// "a:b c" -> entries named a (entry point b) and c (entry point c).
std::vector<PipelineEntry> parse(const std::string& line) {
  std::vector<PipelineEntry> out;
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    size_t colon = w.find(':');
    if (colon == std::string::npos) {
      out.push_back({w, w});
    } else {
      out.push_back({w.substr(0, colon), w.substr(colon + 1)});
    }
  }
  return out;
}

// The names of the resulting pipeline, an inserted filter marked with '+'.
std::string order(const std::string& line) {
  std::string out;
  for (const PipelineEntry& e : with_required_filters(parse(line))) {
    out += (out.empty() ? "" : " ") + std::string(e.inserted ? "+" : "") + e.name;
  }
  return out;
}

TEST_CASE("required filters: a stock pipeline gets copy, dlo and versioned_writes after auth") {
  CHECK(order("catch_errors gatekeeper healthcheck proxy-logging:proxy_logging cache:memcache "
              "listing_formats tempauth") ==
        "catch_errors gatekeeper healthcheck proxy-logging cache listing_formats tempauth +copy "
        "+dlo +versioned_writes");
}

TEST_CASE("required filters: an empty pipeline gets all six at the front in Swift's order") {
  CHECK(order("") == "+catch_errors +gatekeeper +listing_formats +copy +dlo +versioned_writes");
  CHECK(order("tempauth") ==
        "+catch_errors +gatekeeper +listing_formats tempauth +copy +dlo +versioned_writes");
}

TEST_CASE("required filters: gatekeeper goes right after catch_errors only when it starts") {
  CHECK(order("catch_errors proxy-logging:proxy_logging cache:memcache tempauth") ==
        "catch_errors +gatekeeper proxy-logging cache +listing_formats tempauth +copy +dlo "
        "+versioned_writes");
  CHECK(order("proxy-logging:proxy_logging catch_errors cache:memcache tempauth") ==
        "+gatekeeper proxy-logging catch_errors cache +listing_formats tempauth +copy +dlo "
        "+versioned_writes");
  CHECK(order("healthcheck proxy-logging:proxy_logging tempauth") ==
        "+catch_errors +gatekeeper healthcheck proxy-logging +listing_formats tempauth +copy "
        "+dlo +versioned_writes");
}

TEST_CASE("required filters: filters already present stay where the config puts them") {
  CHECK(order("gatekeeper catch_errors tempauth") ==
        "gatekeeper catch_errors +listing_formats tempauth +copy +dlo +versioned_writes");
  CHECK(order("catch_errors gatekeeper healthcheck proxy-logging:proxy_logging cache:memcache "
              "listing_formats copy tempauth ratelimit") ==
        "catch_errors gatekeeper healthcheck proxy-logging cache listing_formats copy tempauth "
        "+dlo +versioned_writes ratelimit");
  CHECK(order("copy tempauth catch_errors") ==
        "+gatekeeper copy tempauth catch_errors +listing_formats +dlo +versioned_writes");
}

TEST_CASE("required filters: presence is by entry point, not by section name") {
  CHECK(order("errors:catch_errors gk:gatekeeper lf:listing_formats c:copy tempauth") ==
        "errors gk lf c tempauth +dlo +versioned_writes");
}

TEST_CASE("internal headers: Swift's gatekeeper list") {
  for (const char* name :
       {"X-Backend-Storage-Policy-Index", "x-backend-anything",
        "X-Account-Sysmeta-Core-Access-Control", "X-Container-Sysmeta-Foo",
        "X-Object-Sysmeta-Container-Update-Override-Etag",
        "X-Object-Transient-Sysmeta-Crypto-Meta", "X-Account-Host", "X-Container-Partition",
        "X-Container-Root-Db-State", "X-Delete-At-Container", "X-Delete-At-Device"}) {
    CHECK_MESSAGE(is_internal_header(name), name);
  }
  for (const char* name :
       {"X-Object-Meta-Color", "X-Container-Meta-Sysmeta", "X-Account-Meta-Temp-Url-Key",
        "X-Container-Read", "X-Delete-At", "X-Delete-After", "X-Account-Hosts",
        "X-Timestamp", "X-Remove-Container-Meta-Color", "X-Remove-Container-Read", "Backend",
        "X-Container-Sysmeta"}) {
    CHECK_MESSAGE(!is_internal_header(name), name);
  }
}

TEST_CASE("internal headers: the X-Remove- and underscore spellings count too") {
  CHECK(is_internal_header("X-Remove-Account-Sysmeta-Core-Access-Control"));
  CHECK(is_internal_header("x-remove-container-sysmeta-x"));
  CHECK(is_internal_header("X-Remove-Object-Sysmeta-X"));
  CHECK(is_internal_header("X-Remove-Object-Transient-Sysmeta-X"));
  CHECK(is_internal_header("X-Remove-Backend-X"));
  CHECK(is_internal_header("X_Backend_Storage_Policy_Index"));
  CHECK(is_internal_header("X_Remove_Account_Sysmeta_X"));
  CHECK(is_internal_header("x-object_sysmeta-x"));
  // Long names: a prefix decides however long the rest; an exact name is never a prefix.
  CHECK(is_internal_header("X-Remove-Object-Transient-Sysmeta-" + std::string(200, 'y')));
  CHECK(is_internal_header("X_Object_Sysmeta_" + std::string(200, 'y')));
  CHECK(is_internal_header("X-Remove-Container-Root-Db-State"));
  CHECK_FALSE(is_internal_header("X-Remove-Container-Root-Db-State" + std::string(9, 'y')));
  CHECK_FALSE(is_internal_header("X-Delete-At-Container" + std::string(200, 'y')));
  CHECK_FALSE(is_internal_header("X-Object-Meta-" + std::string(200, 'y')));
}

TEST_CASE("strip_client_headers: drops internal headers and returns X-Timestamp") {
  common::http::HeaderMap h;
  h.set("X-Timestamp", "9999999999.00000");
  h.set("X-Backend-Container-Update-Override-Etag", "forged");
  h.set("X-Object-Sysmeta-Container-Update-Override-Etag", "forged");
  h.set("X-Object-Meta-Color", "blue");
  h.set("Content-Type", "text/plain");
  h.set("X_Timestamp", "1.0");
  CHECK(has_client_forbidden_headers(h));
  auto ts = strip_client_headers(h);
  REQUIRE(ts.has_value());
  CHECK(*ts == "9999999999.00000");
  CHECK(!h.contains("X-Timestamp"));
  CHECK(!h.contains("X_Timestamp"));
  CHECK(!h.contains("X-Backend-Container-Update-Override-Etag"));
  CHECK(!h.contains("X-Object-Sysmeta-Container-Update-Override-Etag"));
  CHECK(h.get_or("X-Object-Meta-Color", "") == "blue");
  CHECK(h.get_or("Content-Type", "") == "text/plain");
  CHECK_FALSE(has_client_forbidden_headers(h));
  for (const char* name : {"x_timestamp", "X-TIMESTAMP", "X-Backend-Anything"}) {
    common::http::HeaderMap one;
    one.add(name, "1");
    CHECK_MESSAGE(has_client_forbidden_headers(one), name);
  }

  common::http::HeaderMap plain;
  plain.set("X-Object-Meta-A", "1");
  CHECK_FALSE(has_client_forbidden_headers(plain));
  CHECK(!strip_client_headers(plain).has_value());
  CHECK(plain.size() == 1);
}

// Info lookups that find every account and container with no metadata.
class NoInfo final : public InfoLookup {
 public:
  boost::asio::awaitable<CachedInfo> account_info(const std::string&,
                                                  const common::http::Request&,
                                                  const ProxyEnv&) override {
    co_return CachedInfo{200, {}, {}};
  }
  boost::asio::awaitable<CachedInfo> container_info(const std::string&, const std::string&,
                                                    const common::http::Request&,
                                                    const ProxyEnv&) override {
    co_return CachedInfo{200, {}, {}};
  }
  boost::asio::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

// make_middleware(name) from an empty [filter:x] section; the error message, "" on success.
std::string make_error(std::string_view name) {
  common::SwiftConf swift;
  std::string swift_dir = "/nonexistent";
  NoInfo info;
  auto conf = common::Config::parse("[filter:x]\nuse = egg:swift#" + std::string(name) + "\n");
  REQUIRE(conf.ok());
  auto mw = make_middleware(name, conf->section("filter:x"),
                            MiddlewareContext{swift, swift_dir, info});
  return mw.ok() ? "" : mw.status().to_string();
}

// The paste.filter_factory entry points of Swift 2.35's setup.cfg.
constexpr const char* kSwift235[] = {
    "healthcheck", "crossdomain", "memcache", "read_only", "ratelimit", "backend_ratelimit",
    "cname_lookup", "catch_errors", "domain_remap", "staticweb", "tempauth", "keystoneauth",
    "recon", "tempurl", "formpost", "name_check", "bulk", "container_quotas", "account_quotas",
    "proxy_logging", "dlo", "slo", "list_endpoints", "gatekeeper", "container_sync", "xprofile",
    "versioned_writes", "copy", "keymaster", "encryption", "kms_keymaster", "kmip_keymaster",
    "listing_formats", "symlink", "s3api", "s3token", "etag_quoter"};

TEST_CASE("middleware table: every entry point of Swift 2.35 is known, and only those") {
  for (const char* name : kSwift235) {
    CHECK_MESSAGE(is_swift_middleware(name), name);
    // Built, refused for a bad option, or not implemented: never "unknown".
    CHECK_MESSAGE(make_error(name).find("unknown middleware") == std::string::npos, name);
  }
  CHECK(swift_middleware_names().size() == std::size(kSwift235));
  for (const char* name : {"proxy", "s3", "Copy", "copy ", "", "versioned_writes2"}) {
    CHECK_MESSAGE(!is_swift_middleware(name), name);
  }
  // Every middleware Apus implements is one of Swift's.
  for (const char* name : {"catch_errors", "gatekeeper", "healthcheck", "proxy_logging",
                           "memcache", "listing_formats", "crossdomain", "tempauth",
                           "ratelimit", "copy"}) {
    CHECK_MESSAGE(has_middleware(name), name);
    CHECK_MESSAGE(make_error(name).empty(), name);
  }
}

// make_middleware("memcache") from [filter:x] holding `options`; the error, "" on success.
std::string memcache_error(const std::string& options) {
  common::SwiftConf swift;
  std::string swift_dir = "/nonexistent";
  NoInfo info;
  auto conf = common::Config::parse("[filter:x]\nuse = egg:swift#memcache\n"
                                    "memcache_servers = 127.0.0.1:11211\n" + options);
  REQUIRE(conf.ok());
  auto mw = make_middleware("memcache", conf->section("filter:x"),
                            MiddlewareContext{swift, swift_dir, info});
  return mw.ok() ? "" : mw.status().to_string();
}

TEST_CASE("memcache filter: Swift's connect_timeout and io_timeout are read and checked") {
  CHECK(memcache_error("connect_timeout = 0.5\nio_timeout = 5\n").empty());
  for (const char* bad : {"io_timeout = 0", "io_timeout = -1", "io_timeout = soon",
                          "io_timeout = nan", "connect_timeout = 0", "connect_timeout = 1e9"}) {
    std::string error = memcache_error(std::string(bad) + "\n");
    CHECK_MESSAGE(error.find(std::string(bad).substr(0, std::string(bad).find(' '))) !=
                      std::string::npos,
                  bad, ": ", error);
  }
}

TEST_CASE("middleware table: one of Swift's that Apus lacks is not implemented, not unknown") {
  std::string s3 = make_error("s3token");
  CHECK(s3.find("egg:swift#s3token") != std::string::npos);
  CHECK(s3.find("[filter:x]") != std::string::npos);
  CHECK(s3.find("is not implemented") != std::string::npos);
  CHECK(!has_middleware("s3token"));
  std::string other = make_error("nonesuch");
  CHECK(other.find("unknown middleware egg:swift#nonesuch") != std::string::npos);
  CHECK(other.find("not implemented") == std::string::npos);
}

}  // namespace
}  // namespace apus::proxy
