// The proxy access line (proxy/access_log.h) against what Swift 2.30.1's LogStringFormatter,
// StrAnonymizer and StrFormatTime print for the same values (computed with python3-swift).
#include "proxy/access_log.h"

#include <doctest/doctest.h>

namespace apus::proxy {
namespace {

std::string format(std::string_view text, const AccessLogFields& f, std::string method = "md5",
                   std::string salt = "") {
  auto t = AccessLogTemplate::parse(text, std::move(method), std::move(salt));
  REQUIRE(t.ok());
  return t->format(f);
}

TEST_CASE("fields, attributes and quoting as Swift's formatter prints them") {
  AccessLogFields f;
  f.client_ip = "1.2.3.4";
  f.path = "/v1/a/c/o x?y=1";
  f.end_time = 1700000000.25;
  f.start_time = 1699999999.123456789;
  f.user_agent = "curl/8 (x y)";
  f.ttfb = 0.0123;
  CHECK(format("{client_ip.anonymized} {end_time.asctime} {end_time.iso8601} {start_time.ms} "
               "{start_time.us} {start_time.ns} {start_time.s} {start_time.Y} {start_time.Z} "
               "{start_time.a} {source} {{lit}} {user_agent} {ttfb} {status_int} {bytes_recvd}",
               f) ==
        "{MD5}6465ec74397c9126916786bbcd6d7601 Tue%20Nov%2014%2022:13:20%202023 "
        "2023-11-14T22:13:20 123 123456 123456717 1699999999 2023 UTC Tue - {lit} "
        "curl/8%20%28x%20y%29 0.0123 - -");
  CHECK(format("{path.anonymized}", f, "sha256", "salty") ==
        "{SSHA256}a32543b59319ec59df0fc04b9d57068011a8bb5467d08dabbfe54e76d98a4a74");
}

TEST_CASE("the default template: Swift's field order") {
  AccessLogFields f;
  f.client_ip = f.remote_addr = "127.0.0.1";
  f.end_time = 1700000000.5;
  f.start_time = 1700000000.25;
  f.method = "PUT";
  f.path = "/v1/AUTH_test/c/o";
  f.protocol = "HTTP/1.1";
  f.status_int = 201;
  f.user_agent = "curl";
  f.auth_token = "AUTH_tk0123456789abcdef...";
  f.bytes_recvd = 5;
  f.transaction_id = "tx1";
  f.log_info = "a:1,b";
  f.policy_index = "0";
  CHECK(format(kDefaultLogTemplate, f) ==
        "127.0.0.1 127.0.0.1 14/Nov/2023/22/13/20 PUT /v1/AUTH_test/c/o HTTP/1.1 201 - curl "
        "AUTH_tk0123456789abcdef... 5 - - tx1 - 0.2500 - a:1%2Cb 1700000000.250000000 "
        "1700000000.500000000 0");
}

TEST_CASE("a time's text follows its second and its format from line to line") {
  AccessLogFields f;
  f.end_time = 1700000000.5;
  CHECK(format("{end_time.datetime}", f) == "14/Nov/2023/22/13/20");
  CHECK(format("{end_time.iso8601}", f) == "2023-11-14T22:13:20");
  f.end_time = 1700000001.25;
  CHECK(format("{end_time.datetime} {end_time.S} {end_time}", f) ==
        "14/Nov/2023/22/13/21 21 1700000001.250000000");
  f.end_time = 86400 * 365.25 * 30;
  CHECK(format("{end_time.datetime} {request_time} {wire_status_int}", f) ==
        "01/Jan/2000/12/00/00 946728000.0000 -");
  f.status_int = 499;
  CHECK(format("{wire_status_int} {status_int}", f) == "499 499");
  f.wire_status_int = 200;
  CHECK(format("{wire_status_int} {status_int}", f) == "200 499");
}

TEST_CASE("templates Swift refuses, and format specs, fail at startup") {
  for (const char* bad : {"{nope}", "{path.upper}", "{start_time.Q}", "{status_int:>5}", "{path!r}",
                          "{client_ip", "a } b", "{}", "{method.x}", "{method.anonymized}",
                          "{status_int.s}", "{end_time.anonymized}"}) {
    CAPTURE(bad);
    auto t = AccessLogTemplate::parse(bad);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().message().starts_with("Cannot interpolate log_msg_template"));
  }
  auto t = AccessLogTemplate::parse("{path}", "crc32");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message() == "Unsupported hashing method: 'crc32'");
}

TEST_CASE("signatures and tokens are cut to reveal_sensitive_prefix") {
  CHECK(obscure_sensitive("0123456789abcdefXYZ", 16) == "0123456789abcdef...");
  CHECK(obscure_sensitive("short", 16) == "short");
  CHECK(obscure_target("/v1/a/c/o?temp_url_sig=0123456789abcdef0123&temp_url_expires=9", 16) ==
        "/v1/a/c/o?temp_url_sig=0123456789abcdef...&temp_url_expires=9");
  CHECK(obscure_target("/b/k?X-Amz-Signature=aaaaaaaaaaaaaaaaaaaa&Signature=bb", 4) ==
        "/b/k?X-Amz-Signature=aaaa...&Signature=bb");
  CHECK(obscure_target("/v1/a", 4) == "/v1/a");
}

TEST_CASE("{headers}: title-cased names, sensitive values obscured, an optional list") {
  common::http::HeaderMap h;
  h.add("x-object-meta-color", "blue");
  h.add("authorization", "AWS4-HMAC-SHA256 Credential=very-long");
  h.add("User-Agent", "curl");
  CHECK(logged_headers(h, {}, 16) ==
        "X-Object-Meta-Color: blue\nAuthorization: AWS4-HMAC-SHA256...\nUser-Agent: curl");
  CHECK(logged_headers(h, {"User-Agent"}, 16) == "User-Agent: curl");
}

}  // namespace
}  // namespace apus::proxy
