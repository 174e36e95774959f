// aws-chunked bodies (proxy/s3api/aws_chunked.h): AWS's documented signed example decodes and
// verifies in pieces of any size; every truncation ends in kIncomplete at finish(); each of
// Swift's failure kinds.
#include "proxy/s3api/aws_chunked.h"

#include <doctest/doctest.h>

#include <string>

namespace {

using apus::common::http::HeaderMap;
using apus::proxy::s3api::AwsChunkedDecoder;
using apus::proxy::s3api::parse_s3_auth;
using apus::proxy::s3api::S3AuthConfig;
using apus::proxy::s3api::S3AuthRequest;
using apus::proxy::s3api::S3Signature;
using Error = AwsChunkedDecoder::Error;

// AWS's sigv4-streaming example: 66560 bytes of 'a' in chunks of 65536, 1024 and 0.
const std::string kSeedAuth =
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
    "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
    "x-amz-decoded-content-length;x-amz-storage-class,"
    "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

std::string example_body() {
  std::string b = "10000;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\n";
  b += std::string(65536, 'a') + "\r\n";
  b += "400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497\r\n";
  b += std::string(1024, 'a') + "\r\n";
  b += "0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\n\r\n";
  return b;
}

struct Seeded {
  HeaderMap headers;
  std::optional<S3Signature> sig;
  Seeded() {
    headers.add("Host", "s3.amazonaws.com");
    headers.add("x-amz-date", "20130524T000000Z");
    headers.add("x-amz-storage-class", "REDUCED_REDUNDANCY");
    headers.add("Authorization", kSeedAuth);
    headers.add("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    headers.add("Content-Encoding", "aws-chunked");
    headers.add("x-amz-decoded-content-length", "66560");
    headers.add("Content-Length", "66824");
    S3AuthRequest r{.method = "PUT",
                    .raw_path = "/examplebucket/chunkObject.txt",
                    .query = "",
                    .headers = &headers,
                    .bucket_in_host = ""};
    auto out = parse_s3_auth(r, S3AuthConfig{}, 1369353600);
    REQUIRE(out.signature);
    sig = std::move(out.signature);
    REQUIRE(sig->check("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"));
  }
};

}  // namespace

TEST_CASE("aws-chunked: AWS's signed example decodes in pieces of any size") {
  const std::string body = example_body();
  for (size_t piece : {size_t{1}, size_t{7}, size_t{100}, size_t{8192}, body.size()}) {
    Seeded s;
    AwsChunkedDecoder d(66560, {}, &*s.sig);
    std::string out;
    for (size_t at = 0; at < body.size(); at += piece) {
      auto f = d.feed(std::string_view(body).substr(at, piece), out);
      REQUIRE(!f);
    }
    CHECK(!d.finish());
    CHECK(d.done());
    CHECK(out == std::string(66560, 'a'));
  }
}

TEST_CASE("aws-chunked: every truncation fails at finish(), never waits") {
  const std::string body = example_body();
  // Every cut in the headers and trailer, and a few inside the data.
  for (size_t cut = 0; cut < body.size() - 2; cut += (cut > 120 && cut < 65600) ? 997 : 1) {
    Seeded s;
    AwsChunkedDecoder d(66560, {}, &*s.sig);
    std::string out;
    auto f = d.feed(std::string_view(body).substr(0, cut), out);
    if (!f) f = d.finish();
    CAPTURE(cut);
    REQUIRE(f);
    CHECK((f->error == Error::kIncomplete || f->error == Error::kSize));
    CHECK(!d.done());
  }
}

TEST_CASE("aws-chunked: a changed byte fails its chunk's signature") {
  std::string body = example_body();
  body[200] = 'b';
  Seeded s;
  AwsChunkedDecoder d(66560, {}, &*s.sig);
  std::string out;
  auto f = d.feed(body, out);
  REQUIRE(f);
  CHECK(f->error == Error::kSignatureMismatch);
  // Failed for good.
  auto again = d.feed("0\r\n\r\n", out);
  REQUIRE(again);
  CHECK(again->error == Error::kSignatureMismatch);
}

TEST_CASE("aws-chunked: Swift's failure kinds") {
  std::string out;
  SUBCASE("more payload than x-amz-decoded-content-length") {
    AwsChunkedDecoder d(3, {}, nullptr);
    auto f = d.feed("5\r\nhello\r\n0\r\n\r\n", out);
    REQUIRE(f);
    CHECK(f->error == Error::kSize);
    CHECK(f->expected == 3);
    CHECK(f->provided == 5);
  }
  SUBCASE("less payload than announced") {
    AwsChunkedDecoder d(10, {}, nullptr);
    auto f = d.feed("5\r\nhello\r\n0\r\n\r\n", out);
    REQUIRE(f);
    CHECK(f->error == Error::kSize);
    CHECK(f->provided == 5);
  }
  SUBCASE("a small chunk before another") {
    AwsChunkedDecoder d(10, {}, nullptr);
    auto f = d.feed("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", out);
    REQUIRE(f);
    CHECK(f->error == Error::kChunkTooSmall);
    CHECK(f->chunk_number == 2);
    CHECK(f->bad_chunk_size == 5);
  }
  SUBCASE("a bad size or a line without CR") {
    for (std::string_view body : {"zz\r\n", "5\nhello\r\n", "5\r\nhelloXX0\r\n\r\n"}) {
      AwsChunkedDecoder d(5, {}, nullptr);
      auto f = d.feed(body, out);
      if (!f) f = d.finish();
      REQUIRE(f);
      CHECK(f->error == Error::kIncomplete);
    }
  }
  SUBCASE("an endless header line is cut off") {
    AwsChunkedDecoder d(5, {}, nullptr);
    auto f = d.feed(std::string(10000, '1'), out);
    REQUIRE(f);
    CHECK(f->error == Error::kIncomplete);
  }
  SUBCASE("unsigned trailers: expected, unexpected, missing") {
    const std::set<std::string> crc = {"x-amz-checksum-crc32"};
    AwsChunkedDecoder ok(5, crc, nullptr);
    CHECK(!ok.feed("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n", out));
    CHECK(!ok.finish());
    REQUIRE(ok.trailers().size() == 1);
    CHECK(ok.trailers()[0].second == "NhCmhg==");
    AwsChunkedDecoder other(5, crc, nullptr);
    auto f = other.feed("5\r\nhello\r\n0\r\nx-amz-checksum-sha1:x\r\n\r\n", out);
    REQUIRE(f);
    CHECK(f->error == Error::kMalformedTrailer);
    AwsChunkedDecoder none(5, crc, nullptr);
    CHECK(!none.feed("5\r\nhello\r\n0\r\n", out));
    auto g = none.finish();
    REQUIRE(g);
    CHECK(g->error == Error::kMalformedTrailer);
  }
}
