// The pipeline rules of proxy/middleware.h: Swift's required filters and where they go, and
// the headers a client may never send. The expected orders are what Swift 2.30.1's
// modify_wsgi_pipeline() makes of the same pipelines.
#include "proxy/middleware.h"

#include <doctest/doctest.h>

#include <sstream>

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
}

TEST_CASE("strip_client_headers: drops internal headers and returns X-Timestamp") {
  common::http::HeaderMap h;
  h.set("X-Timestamp", "9999999999.00000");
  h.set("X-Backend-Container-Update-Override-Etag", "forged");
  h.set("X-Object-Sysmeta-Container-Update-Override-Etag", "forged");
  h.set("X-Object-Meta-Color", "blue");
  h.set("Content-Type", "text/plain");
  h.set("X_Timestamp", "1.0");
  auto ts = strip_client_headers(h);
  REQUIRE(ts.has_value());
  CHECK(*ts == "9999999999.00000");
  CHECK(!h.contains("X-Timestamp"));
  CHECK(!h.contains("X_Timestamp"));
  CHECK(!h.contains("X-Backend-Container-Update-Override-Etag"));
  CHECK(!h.contains("X-Object-Sysmeta-Container-Update-Override-Etag"));
  CHECK(h.get_or("X-Object-Meta-Color", "") == "blue");
  CHECK(h.get_or("Content-Type", "") == "text/plain");

  common::http::HeaderMap plain;
  plain.set("X-Object-Meta-A", "1");
  CHECK(!strip_client_headers(plain).has_value());
  CHECK(plain.size() == 1);
}

}  // namespace
}  // namespace apus::proxy
