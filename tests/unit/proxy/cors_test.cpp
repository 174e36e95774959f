// S3 bucket CORS (proxy/s3api/cors.h): the CORSConfiguration document S3 takes and refuses,
// the stored form, and which rule answers an origin, a method and request headers.
#include "proxy/s3api/cors.h"

#include <doctest/doctest.h>

#include <string>
#include <variant>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::add_cors_headers;
using apus::proxy::s3api::cors_document;
using apus::proxy::s3api::CorsRule;
using apus::proxy::s3api::CorsRules;
using apus::proxy::s3api::decode_cors;
using apus::proxy::s3api::encode_cors;
using apus::proxy::s3api::matching_cors_rule;
using apus::proxy::s3api::parse_cors_xml;
using apus::proxy::s3api::S3Error;

std::string config(const std::string& rules) {
  return "<CORSConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + rules +
         "</CORSConfiguration>";
}

std::string rule(const std::string& origin, const std::string& method,
                 const std::string& more = "") {
  return "<CORSRule><AllowedOrigin>" + origin + "</AllowedOrigin><AllowedMethod>" + method +
         "</AllowedMethod>" + more + "</CORSRule>";
}

CorsRules parsed(const std::string& body) {
  auto v = parse_cors_xml(body);
  REQUIRE(std::holds_alternative<CorsRules>(v));
  return std::get<CorsRules>(v);
}

std::string error_of(const std::string& body) {
  auto v = parse_cors_xml(body);
  const auto* e = std::get_if<S3Error>(&v);
  return e ? e->code + ": " + e->message : "";
}

}  // namespace

TEST_CASE("cors: a configuration's rules, stored and shown again") {
  CorsRules rules = parsed(config(
      rule("*.example.com", "GET",
           "<ID>one</ID><AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader>"
           "<ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>3000</MaxAgeSeconds>") +
      rule("*", "HEAD")));
  REQUIRE(rules.size() == 2);
  CHECK(rules[0].id == "one");
  CHECK(rules[0].methods == std::vector<std::string>{"GET", "PUT"});
  CHECK(rules[0].max_age == 3000);
  CHECK(decode_cors(encode_cors(rules)) == rules);
  CHECK(parsed(cors_document(rules)) == rules);
  CHECK(decode_cors("").empty());
  CHECK(decode_cors("{not json").empty());
}

TEST_CASE("cors: what S3 refuses") {
  CHECK(error_of("<CORSConfiguration") .starts_with("MalformedXML"));
  CHECK(error_of(config("")).starts_with("MalformedXML"));
  CHECK(error_of(config("<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>"))
            .starts_with("MalformedXML"));
  CHECK(error_of(config("<CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>"))
            .starts_with("MalformedXML"));
  CHECK(error_of(config(rule("*", "PATCH"))) ==
        "InvalidRequest: Found unsupported HTTP method in CORS config. Unsupported method is PATCH");
  CHECK(error_of(config(rule("*.a.*", "GET"))) ==
        "InvalidRequest: AllowedOrigin \"*.a.*\" can not have more than one wildcard.");
  CHECK(error_of(config(rule("*", "GET", "<AllowedHeader>*-*</AllowedHeader>")))
            .starts_with("InvalidRequest"));
  CHECK(error_of(config(rule("*", "GET", "<MaxAgeSeconds>-1</MaxAgeSeconds>")))
            .starts_with("MalformedXML"));
  std::string many;
  for (int i = 0; i < 101; ++i) many += rule("*", "GET");
  CHECK(error_of(config(many)).starts_with("MalformedXML"));
}

TEST_CASE("cors: the first rule matching origin, method and headers answers") {
  CorsRules rules = parsed(config(rule("*suffix", "GET") + rule("start*end", "GET") +
                                  rule("prefix*", "GET") + rule("*.put", "PUT") +
                                  rule("http://h.example", "POST",
                                       "<AllowedHeader>x-amz-*</AllowedHeader>"
                                       "<AllowedHeader>Content-Type</AllowedHeader>")));
  auto match = [&](std::string_view origin, std::string_view method,
                   std::vector<std::string> headers = {}) {
    const CorsRule* r = matching_cors_rule(rules, origin, method, headers);
    return r ? r->origins[0] : std::string("-");
  };
  CHECK(match("foo.suffix", "GET") == "*suffix");
  CHECK(match("startend", "GET") == "start*end");  // '*' takes the empty run too
  CHECK(match("start12end", "GET") == "start*end");
  CHECK(match("0start12end", "GET") == "-");
  CHECK(match("prefix.suffix", "GET") == "*suffix");  // the first that matches
  CHECK(match("bla.prefix", "GET") == "-");
  CHECK(match("foo.put", "GET") == "-");
  CHECK(match("foo.put", "PUT") == "*.put");
  CHECK(match("Foo.Suffix", "GET") == "-");  // origins are case-sensitive
  CHECK(match("http://h.example", "POST", {"x-amz-date", "content-type"}) == "http://h.example");
  CHECK(match("http://h.example", "POST", {"x-other"}) == "-");
  CHECK(match("foo.suffix", "GET", {"x-amz-date"}) == "-");  // no header allowed
}

TEST_CASE("cors: the answer's headers") {
  CorsRules rules = parsed(config(
      rule("*", "GET", "<AllowedMethod>HEAD</AllowedMethod><ExposeHeader>ETag</ExposeHeader>") +
      rule("http://a.example", "PUT", "<MaxAgeSeconds>60</MaxAgeSeconds>")));
  HeaderMap any;
  add_cors_headers(rules[0], "http://x.example", {}, any);
  CHECK(any.get_or("Access-Control-Allow-Origin", "") == "*");
  CHECK(any.get_or("Access-Control-Allow-Methods", "") == "GET, HEAD");
  CHECK(any.get_or("Access-Control-Expose-Headers", "") == "ETag");
  CHECK_FALSE(any.contains("Access-Control-Allow-Credentials"));
  HeaderMap one;
  add_cors_headers(rules[1], "http://a.example", {"x-amz-date"}, one);
  CHECK(one.get_or("Access-Control-Allow-Origin", "") == "http://a.example");
  CHECK(one.get_or("Access-Control-Allow-Credentials", "") == "true");
  CHECK(one.get_or("Access-Control-Allow-Headers", "") == "x-amz-date");
  CHECK(one.get_or("Access-Control-Max-Age", "") == "60");
}
