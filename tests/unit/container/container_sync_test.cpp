#include "container-server/container_sync.h"

#include <doctest/doctest.h>

#include <algorithm>

using apus::common::http::HeaderMap;
using apus::container::parse_http_url;
using apus::container::sync_put_headers;
using apus::container::sync_row_owner;

TEST_CASE("sync_row_owner splits rows as Swift's hash_path ordinal does") {
  // Values from Swift 2.30.1: unpack_from('>I', hash_path('AUTH_test', 'src', name,
  // raw_digest=True))[0] with prefix 'pre' and suffix 'suf'.
  apus::common::HashPathConfig hash{"pre", "suf"};
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "o1", 1000) == 3668754048u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "obj with space", 1000) == 547493663u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "\xc3\xa9t\xc3\xa9/x", 1000) ==
        2789966532u % 1000);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 3) == 2);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 4) == 3);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "o1", 3) == 0);
  CHECK(sync_row_owner(hash, "AUTH_test", "src", "a", 1) == 0);
}

TEST_CASE("sync_put_headers keeps the object's headers and drops the GET's own") {
  HeaderMap in;
  in.set("Content-Type", "text/plain;charset=utf-8; swift_bytes=12");
  in.set("Etag", "\"d41d8cd98f00b204e9800998ecf8427e\"");
  in.set("X-Timestamp", "1700000000.12345");
  in.set("Last-Modified", "Tue, 14 Nov 2023 22:13:21 GMT");
  in.set("Date", "Tue, 14 Nov 2023 22:13:22 GMT");
  in.set("Content-Length", "12");
  in.set("X-Object-Meta-Color", "blue");
  in.set("X-Object-Sysmeta-Crypto-Body-Meta", "secret");
  in.set("X-Backend-Timestamp", "1700000000.12345");
  in.set("X-Backend-Data-Timestamp", "1700000000.12345");
  in.set("Content-Disposition", "inline");
  in.set("X-Delete-At", "9999999999");
  in.set("Connection", "keep-alive");
  HeaderMap out = sync_put_headers(in);
  CHECK(out.get_or("Content-Type", "") == "text/plain;charset=utf-8");
  CHECK(out.get_or("Etag", "") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(out.get_or("X-Timestamp", "") == "1700000000.12345");
  CHECK(out.get_or("X-Object-Meta-Color", "") == "blue");
  CHECK(out.get_or("Content-Disposition", "") == "inline");
  CHECK(out.get_or("X-Delete-At", "") == "9999999999");
  for (const char* gone : {"Last-Modified", "Date", "Content-Length", "Connection",
                           "X-Object-Sysmeta-Crypto-Body-Meta", "X-Backend-Timestamp",
                           "X-Backend-Data-Timestamp"}) {
    CHECK_MESSAGE(!out.contains(gone), gone);
  }
}

TEST_CASE("sync_put_headers cleans only a last swift_bytes parameter") {
  // Swift's clean_content_type().
  HeaderMap in;
  in.set("Content-Type", "a;b=1;swift_bytes=1;c=2");
  CHECK(sync_put_headers(in).get_or("Content-Type", "") == "a;b=1;swift_bytes=1;c=2");
  in.set("Content-Type", "application/octet-stream");
  CHECK(sync_put_headers(in).get_or("Content-Type", "") == "application/octet-stream");
}

TEST_CASE("sync_put_headers shows symlink sysmeta as the X-Symlink headers") {
  HeaderMap in;
  in.set("Content-Type", "application/symlink");
  in.set("X-Object-Sysmeta-Symlink-Target", "tgt/obj%20x");
  in.set("X-Object-Sysmeta-Symlink-Target-Account", "AUTH_other");
  in.set("X-Object-Sysmeta-Symlink-Target-Etag", "abc");
  in.set("X-Object-Sysmeta-Symlink-Target-Bytes", "3");
  HeaderMap out = sync_put_headers(in);
  CHECK(out.get_or("X-Symlink-Target", "") == "tgt/obj%20x");
  CHECK(out.get_or("X-Symlink-Target-Account", "") == "AUTH_other");
  CHECK(out.get_or("X-Symlink-Target-Etag", "") == "abc");
  CHECK(out.get_or("X-Symlink-Target-Bytes", "") == "3");
  CHECK_FALSE(out.contains("X-Object-Sysmeta-Symlink-Target"));
}

TEST_CASE("parse_http_url splits sync endpoints") {
  auto u = parse_http_url("http://127.0.0.1:8080/v1/AUTH_a/c");
  REQUIRE(u.ok());
  CHECK_FALSE(u->https);
  CHECK(u->host == "127.0.0.1");
  CHECK(u->port == 8080);
  CHECK(u->authority == "127.0.0.1:8080");
  CHECK(u->path == "/v1/AUTH_a/c");
  auto plain = parse_http_url("http://example.com");
  REQUIRE(plain.ok());
  CHECK(plain->port == 80);
  CHECK(plain->path.empty());
  auto tls = parse_http_url("https://[::1]/v1/");
  REQUIRE(tls.ok());
  CHECK(tls->https);
  CHECK(tls->host == "::1");
  CHECK(tls->port == 443);
  CHECK_FALSE(parse_http_url("ftp://x/").ok());
  CHECK_FALSE(parse_http_url("http://h:99999/").ok());
  CHECK_FALSE(parse_http_url("http:///v1").ok());
}

TEST_CASE("local_ips is the bind address, or every interface's for 0.0.0.0") {
  CHECK(apus::container::local_ips("127.0.0.2") == std::vector<std::string>{"127.0.0.2"});
  auto all = apus::container::local_ips("0.0.0.0");
  CHECK(std::find(all.begin(), all.end(), "127.0.0.1") != all.end());
}
