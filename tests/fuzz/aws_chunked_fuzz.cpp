// Fuzzes the aws-chunked body decoder (proxy/s3api/aws_chunked.h), the reader of what an S3
// client streams. The first bytes pick the form (unsigned, unsigned with a CRC32 trailer, or
// signed with AWS's example seed), the piece size and x-amz-decoded-content-length; the rest
// is the body.
//
// Besides the sanitizers, it checks: the outcome and the payload are the same whether the body
// comes whole or in pieces; the payload never exceeds the announced length and equals it when
// the decoder is done; finish() after a failure fails the same way.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "proxy/s3api/aws_chunked.h"

namespace s3 = apus::proxy::s3api;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "aws_chunked_fuzz: %s\n", what);
  std::abort();
}

// A checked seed signature of AWS's streaming example, fresh for each run of the decoder.
std::optional<s3::S3Signature> seed() {
  apus::common::http::HeaderMap h;
  h.add("Host", "s3.amazonaws.com");
  h.add("x-amz-date", "20130524T000000Z");
  h.add("x-amz-storage-class", "REDUCED_REDUNDANCY");
  h.add("Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-decoded-content-length;x-amz-storage-class,"
        "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
  h.add("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
  h.add("Content-Encoding", "aws-chunked");
  h.add("x-amz-decoded-content-length", "66560");
  h.add("Content-Length", "66824");
  s3::S3AuthRequest r{.method = "PUT",
                      .raw_path = "/examplebucket/chunkObject.txt",
                      .query = "",
                      .headers = &h,
                      .bucket_in_host = ""};
  auto out = s3::parse_s3_auth(r, s3::S3AuthConfig{}, 1369353600);
  if (!out.signature || !out.signature->check("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")) {
    fail("the seed signature does not check");
  }
  return out.signature;
}

struct Run {
  std::optional<s3::AwsChunkedDecoder::Failure> failure;
  std::string payload;
  bool done = false;
};

Run decode(int form, uint64_t length, std::string_view body, size_t piece) {
  std::optional<s3::S3Signature> sig;
  std::set<std::string> trailers;
  if (form == 1) trailers = {"x-amz-checksum-crc32"};
  if (form == 2) sig = seed();
  s3::AwsChunkedDecoder d(length, trailers, sig ? &*sig : nullptr);
  Run run;
  for (size_t at = 0; at < body.size() && !run.failure; at += piece) {
    run.failure = d.feed(body.substr(at, piece), run.payload);
  }
  if (!run.failure) run.failure = d.finish();
  if (run.failure) {
    auto again = d.finish();
    if (!again || again->error != run.failure->error) fail("a failure did not stick");
  }
  run.done = d.done();
  if (run.payload.size() > length) fail("more payload than announced");
  if (run.done && (run.failure || run.payload.size() != length)) fail("done without the payload");
  return run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const int form = data[0] % 3;
  const size_t piece = 1 + data[1] % 64;
  const uint64_t length = (uint64_t{data[2]} << 8 | data[3]) % 20000;
  std::string_view body(reinterpret_cast<const char*>(data) + 4, size - 4);
  Run whole = decode(form, length, body, body.size() + 1);
  Run pieces = decode(form, length, body, piece);
  if (whole.done != pieces.done || whole.failure.has_value() != pieces.failure.has_value() ||
      (whole.failure && whole.failure->error != pieces.failure->error)) {
    fail("pieces changed the outcome");
  }
  if (whole.done && whole.payload != pieces.payload) fail("pieces changed the payload");
  return 0;
}
