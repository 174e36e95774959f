// S3 request authentication (proxy/s3api/s3_auth.h). Requests were signed by botocore 1.29
// (Debian's, as boto3 and the AWS CLI sign them) at 2026-12-02T01:30:15Z with access key
// "test:tester" and secret "testing"; error cases follow Swift's s3api.
#include "proxy/s3api/s3_auth.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::parse_s3_auth;
using apus::proxy::s3api::S3AuthConfig;
using apus::proxy::s3api::S3AuthOutcome;
using apus::proxy::s3api::S3AuthRequest;
using apus::proxy::s3api::S3Signature;

constexpr double kSignedAt = 1796175015;  // 2026-12-02T01:30:15Z

struct Signed {
  std::string method, path, query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string bucket_in_host;
};

HeaderMap header_map(const Signed& s) {
  HeaderMap h;
  for (const auto& [k, v] : s.headers) h.add(k, v);
  return h;
}

S3AuthOutcome parse(const Signed& s, const HeaderMap& h, double now = kSignedAt) {
  S3AuthRequest r{.method = s.method,
                  .raw_path = s.path,
                  .query = s.query,
                  .headers = &h,
                  .bucket_in_host = s.bucket_in_host};
  return parse_s3_auth(r, S3AuthConfig{}, now);
}

const Signed kV4Get = {
    "GET", "/bucket/key%20with%20space", "list-type=2&prefix=a%2Fb",
    {{"Host", "127.0.0.1:8080"},
     {"X-Amz-Date", "20261202T013015Z"},
     {"X-Amz-Content-SHA256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
     {"Authorization",
      "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
      "Signature=764b111b79579ffb463b28f0123d0220204927c0f92eb6e71bba122e97830ff7"}},
    ""};

const Signed kV4Put = {
    "PUT", "/bucket/obj", "",
    {{"Host", "127.0.0.1:8080"},
     {"Content-Type", "text/plain"},
     {"x-amz-meta-color", "  blue   green "},
     {"Content-MD5", "XrY7u+Ae7tCTyyK7j1rNww=="},
     {"X-Amz-Date", "20261202T013015Z"},
     {"X-Amz-Content-SHA256", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
     {"Authorization",
      "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
      "SignedHeaders=content-md5;content-type;host;x-amz-content-sha256;x-amz-date;"
      "x-amz-meta-color, "
      "Signature=1ca8bfff4494f6d6c837ed9f9088a0f304e4196136373664f2ee7afa59eaed61"},
     {"Content-Length", "5"}},
    ""};

const Signed kV4Presigned = {
    "GET", "/bucket/k%C3%A9y",
    "versionId=3&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=test%3Atester%2F20261202%2Fus-"
    "east-1%2Fs3%2Faws4_request&X-Amz-Date=20261202T013015Z&X-Amz-Expires=3600&X-Amz-"
    "SignedHeaders=host&X-Amz-Signature="
    "aa4ca4f6a4c11b3bdd254d1dda7f0471edf5f9afa5f8c048aeeb53a70266ea16",
    {{"Host", "127.0.0.1:8080"}},
    ""};

const Signed kV4VirtualHost = {
    "GET", "/obj", "uploads=",
    {{"Host", "bucket.s3.example.net:8080"},
     {"X-Amz-Date", "20261202T013015Z"},
     {"X-Amz-Content-SHA256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
     {"Authorization",
      "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
      "Signature=67714918f3bf8bed8c24f235a4f378359e7aa74acd2aa22528ac396d86df601c"}},
    "bucket"};

const Signed kV2Put = {"PUT", "/bucket/obj", "acl",
                       {{"Host", "127.0.0.1:8080"},
                        {"Content-Type", "text/plain"},
                        {"x-amz-meta-a", "b"},
                        {"Date", "Wed, 02 Dec 2026 01:30:15 GMT"},
                        {"Authorization", "AWS test:tester:PS2N4i+T5vhfZyx9VtDAys4OPsI="},
                        {"Content-Length", "5"}},
                       ""};

const Signed kV2Presigned = {
    "GET", "/bucket/obj",
    "response-content-type=text/x&AWSAccessKeyId=test%3Atester&Signature=hO6vOtvDc%2FNdY3lP35Z5HK%"
    "2FsPfo%3D&Expires=1796178615",
    {{"Host", "127.0.0.1:8080"}, {"Date", "1796178615"}},
    ""};

void expect_valid(const Signed& s, S3Signature::Version version, bool presigned) {
  HeaderMap h = header_map(s);
  auto out = parse(s, h);
  CAPTURE(s.method);
  CAPTURE(s.path);
  REQUIRE(out.is_s3);
  if (out.error) FAIL(out.error->code << ": " << out.error->message);
  REQUIRE(out.signature);
  CHECK(out.signature->version() == version);
  CHECK(out.signature->presigned() == presigned);
  CHECK(out.signature->access_key() == "test:tester");
  CHECK(out.signature->check("testing"));
  auto again = parse(s, h);
  CHECK(!again.signature->check("wrong"));
}

}  // namespace

TEST_CASE("s3 auth: requests botocore signed check out with the right secret only") {
  expect_valid(kV4Get, S3Signature::Version::kV4, false);
  expect_valid(kV4Put, S3Signature::Version::kV4, false);
  expect_valid(kV4Presigned, S3Signature::Version::kV4, true);
  expect_valid(kV4VirtualHost, S3Signature::Version::kV4, false);
  expect_valid(kV2Put, S3Signature::Version::kV2, false);
  expect_valid(kV2Presigned, S3Signature::Version::kV2, true);
}

TEST_CASE("s3 auth: Version 4 string to sign and scope") {
  HeaderMap h = header_map(kV4Get);
  auto out = parse(kV4Get, h);
  REQUIRE(out.signature);
  CHECK(out.signature->scope() == "20261202/us-east-1/s3/aws4_request");
  CHECK(out.signature->canonical_request() ==
        "GET\n/bucket/key%20with%20space\nlist-type=2&prefix=a%2Fb\n"
        "host:127.0.0.1:8080\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20261202T013015Z\n\n"
        "host;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("s3 auth: not an S3 request without S3 credentials") {
  HeaderMap h;
  h.set("X-Auth-Token", "AUTH_tk123");
  Signed s{"GET", "/v1/AUTH_test/c", "", {}, ""};
  auto out = parse(s, h);
  CHECK(!out.is_s3);
  CHECK(!out.error);
  CHECK(!out.signature);
}

TEST_CASE("s3 auth: dates, skew and expiry") {
  SUBCASE("a signature from too long ago is RequestTimeTooSkewed") {
    HeaderMap h = header_map(kV4Get);
    auto out = parse(kV4Get, h, kSignedAt + 901);
    REQUIRE(out.error);
    CHECK(out.error->status == 403);
    CHECK(out.error->code == "RequestTimeTooSkewed");
    CHECK(!parse(kV4Get, h, kSignedAt + 900).error);
  }
  SUBCASE("no date at all") {
    Signed s = kV2Put;
    HeaderMap h = header_map(s);
    h.erase("Date");
    auto out = parse(s, h);
    REQUIRE(out.error);
    CHECK(out.error->code == "AccessDenied");
    CHECK(out.error->message == "AWS authentication requires a valid Date or x-amz-date header");
  }
  SUBCASE("an unreadable date") {
    Signed s = kV2Put;
    HeaderMap h = header_map(s);
    h.set("Date", "yesterday");
    auto out = parse(s, h);
    REQUIRE(out.error);
    CHECK(out.error->message == "AWS authentication requires a valid Date or x-amz-date header");
  }
  SUBCASE("a presigned URL past its expiry") {
    HeaderMap h = header_map(kV4Presigned);
    auto out = parse(kV4Presigned, h, kSignedAt + 3601);
    REQUIRE(out.error);
    CHECK(out.error->code == "AccessDenied");
    CHECK(out.error->message == "Request has expired");
    CHECK(!parse(kV4Presigned, h, kSignedAt + 3599).error);
    // The clock's fraction counts, as in Swift: past the last second is expired.
    CHECK(!parse(kV4Presigned, h, kSignedAt + 3600).error);
    auto late = parse(kV4Presigned, h, kSignedAt + 3600.25);
    REQUIRE(late.error);
    CHECK(late.error->message == "Request has expired");
    HeaderMap h2 = header_map(kV2Presigned);
    auto v2 = parse(kV2Presigned, h2, 1796178616);
    REQUIRE(v2.error);
    CHECK(v2.error->message == "Request has expired");
  }
  SUBCASE("X-Amz-Expires out of range") {
    auto with_expires = [](std::string value) {
      Signed s = kV4Presigned;
      auto at = s.query.find("X-Amz-Expires=3600");
      s.query.replace(at, 18, "X-Amz-Expires=" + value);
      return s;
    };
    for (auto [value, message] : std::vector<std::pair<std::string, std::string>>{
             {"abc", "X-Amz-Expires should be a number"},
             {"-1", "X-Amz-Expires must be non-negative"},
             {"604801",
              "X-Amz-Expires must be less than a week (in seconds); that is, the given "
              "X-Amz-Expires must be less than 604800 seconds"},
             {"9223372036854775807",
              "X-Amz-Expires must be less than a week (in seconds); that is, the given "
              "X-Amz-Expires must be less than 604800 seconds"},
             {"9223372036854775808", "X-Amz-Expires should be a number"},
             {"-99999999999999999999", "X-Amz-Expires must be non-negative"}}) {
      Signed s = with_expires(value);
      HeaderMap h = header_map(s);
      auto out = parse(s, h);
      REQUIRE(out.error);
      CHECK(out.error->code == "AuthorizationQueryParametersError");
      CHECK(out.error->message == message);
    }
  }
}

TEST_CASE("s3 auth: malformed Version 4 credentials") {
  auto with_auth = [](std::string auth) {
    Signed s = kV4Get;
    for (auto& [k, v] : s.headers) {
      if (k == "Authorization") v = std::move(auth);
    }
    return s;
  };
  SUBCASE("wrong region names the expected one") {
    Signed s = with_auth(
        "AWS4-HMAC-SHA256 Credential=test:tester/20261202/eu-west-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=00");
    HeaderMap h = header_map(s);
    auto out = parse(s, h);
    REQUIRE(out.error);
    CHECK(out.error->code == "AuthorizationHeaderMalformed");
    CHECK(out.error->message ==
          "The authorization header is malformed; the region 'eu-west-1' is wrong; expecting "
          "'us-east-1'");
    REQUIRE(out.error->details.size() == 1);
    CHECK(out.error->details[0].first == "Region");
    CHECK(out.error->details[0].second == "us-east-1");
  }
  SUBCASE("credential date other than the signing date") {
    Signed s = with_auth(
        "AWS4-HMAC-SHA256 Credential=test:tester/20261201/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=00");
    HeaderMap h = header_map(s);
    auto out = parse(s, h);
    REQUIRE(out.error);
    CHECK(out.error->message ==
          "Invalid credential date \"20261201\". This date is not the same as X-Amz-Date: "
          "\"20261202\".");
  }
  SUBCASE("no SignedHeaders") {
    Signed s = with_auth(
        "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
        "Signature=00");
    HeaderMap h = header_map(s);
    auto out = parse(s, h);
    REQUIRE(out.error);
    CHECK(out.error->code == "AuthorizationHeaderMalformed");
  }
  SUBCASE("a credential of four parts or no signature") {
    for (std::string auth :
         {"AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3, SignedHeaders=host, "
          "Signature=00",
          "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
          "SignedHeaders=host"}) {
      Signed s = with_auth(auth);
      HeaderMap h = header_map(s);
      auto out = parse(s, h);
      REQUIRE(out.error);
      CHECK(out.error->code == "AccessDenied");
    }
  }
  SUBCASE("an x-amz-meta header left out of the signature") {
    HeaderMap h = header_map(kV4Get);
    h.add("X-Amz-Meta-Sneaky", "1");
    auto out = parse(kV4Get, h);
    REQUIRE(out.error);
    CHECK(out.error->code == "AccessDenied");
    CHECK(out.error->message == "There were headers present in the request which were not signed");
    REQUIRE(out.error->details.size() == 1);
    CHECK(out.error->details[0].second == "x-amz-meta-sneaky");
  }
  SUBCASE("a signed header that is missing") {
    HeaderMap h = header_map(kV4Get);
    h.erase("Host");
    auto out = parse(kV4Get, h);
    REQUIRE(out.error);
    CHECK(out.error->code == "SignatureDoesNotMatch");
  }
  SUBCASE("a changed signed header fails the check") {
    HeaderMap h = header_map(kV4Put);
    h.set("Content-Type", "text/html");
    auto out = parse(kV4Put, h);
    REQUIRE(out.signature);
    CHECK(!out.signature->check("testing"));
  }
}

TEST_CASE("s3 auth: Version 2 header forms") {
  HeaderMap h = header_map(kV2Put);
  h.set("Authorization", "AWS no-colon");
  auto out = parse(kV2Put, h);
  REQUIRE(out.error);
  CHECK(out.error->code == "AccessDenied");
  // The sub-resource is part of what is signed: another one fails the check.
  Signed other = kV2Put;
  other.query = "tagging";
  HeaderMap h2 = header_map(other);
  auto changed = parse(other, h2);
  REQUIRE(changed.signature);
  CHECK(!changed.signature->check("testing"));
  CHECK(changed.signature->string_to_sign() ==
        "PUT\n\ntext/plain\nWed, 02 Dec 2026 01:30:15 GMT\nx-amz-meta-a:b\n/bucket/obj?tagging");
}

TEST_CASE("s3 auth: Version 2 of a bucket path takes the bucket with a '/' too") {
  // botocore's Version 2 signer signs a path-style bucket request as "/v2bucket/" (AWS takes
  // both forms); Swift's s3api signs the path as sent and refuses it.
  Signed create = {"PUT", "/v2bucket", "",
                   {{"Host", "127.0.0.1:8080"},
                    {"Date", "Wed, 02 Dec 2026 01:30:15 GMT"},
                    {"Authorization", "AWS test:tester:TkPrGfVWFop2JEM+ZC/ve2Vz+kk="}},
                   ""};
  HeaderMap h = header_map(create);
  auto out = parse(create, h);
  REQUIRE(out.signature);
  CHECK(out.signature->check("testing"));
  CHECK(out.signature->string_to_sign() == "PUT\n\n\nWed, 02 Dec 2026 01:30:15 GMT\n/v2bucket/");
  CHECK(!parse(create, h).signature->check("wrong"));
  // Not for an object's path.
  Signed object = create;
  object.path = "/v2bucket/key";
  HeaderMap ho = header_map(object);
  CHECK(!parse(object, ho).signature->check("testing"));
}

TEST_CASE("s3 auth: Version 4 signs the method upper-cased, as botocore and Swift") {
  Signed lower = {"get", "/bucket", "",
                  {{"Host", "127.0.0.1:8080"},
                   {"X-Amz-Date", "20261202T013015Z"},
                   {"X-Amz-Content-SHA256",
                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
                   {"Authorization",
                    "AWS4-HMAC-SHA256 Credential=test:tester/20261202/us-east-1/s3/aws4_request, "
                    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                    "Signature=2ca0549994294a7a926002e62edd48cc2d9464aac4f25a33f07d2e9a78299b8c"}},
                  ""};
  HeaderMap h = header_map(lower);
  auto out = parse(lower, h);
  REQUIRE(out.signature);
  CHECK(out.signature->check("testing"));
}

TEST_CASE("s3 auth: aws-chunked chunk and trailer signatures chain from the seed") {
  // AWS's documented example (sigv4-streaming): the seed and first chunk signatures of a
  // 66560-byte upload of 'a's with the example key.
  Signed s = {"PUT", "/examplebucket/chunkObject.txt", "",
              {{"Host", "s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                "aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-"
                "sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature="
                "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"},
               {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
               {"Content-Encoding", "aws-chunked"},
               {"x-amz-decoded-content-length", "66560"},
               {"Content-Length", "66824"}},
              ""};
  HeaderMap h = header_map(s);
  auto out = parse(s, h, 1369353600);
  if (out.error) FAIL(out.error->code << ": " << out.error->message);
  REQUIRE(out.signature);
  REQUIRE(out.signature->check("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"));
  // sha256 of 65536 'a's, then of 1024 'a's, then of nothing.
  CHECK(out.signature->check_chunk(
      "bf718b6f653bebc184e1479f1935b8da974d701b893afcf49e701f3e2f9f9c5a",
      "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"));
  CHECK(out.signature->check_chunk(
      "2edc986847e209b4016e141a6dc8716d3207350f416969382d431539bf292e4a",
      "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"));
  CHECK(out.signature->check_chunk(
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"));
  // A bad chunk signature breaks the chain for good.
  CHECK(!out.signature->check_chunk("00", "00"));
}
