// Fuzzes the reading of a request's S3 credentials (proxy/s3api/s3_auth.h): the input is a
// request (method, path, query and header lines, separated by '\n'; a header is
// "name:value"), read at a fixed time.
//
// Besides the sanitizers, it checks: an S3 request gets exactly one of an error and a
// signature; a signature names an access key and a string to sign, checks out with no guessed
// secret, and reading the same request twice gives the same string to sign.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/s3api/s3_auth.h"

namespace s3 = apus::proxy::s3api;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "s3_auth_fuzz: %s\n", what);
  std::abort();
}

std::vector<std::string_view> lines(std::string_view in) {
  std::vector<std::string_view> out;
  for (;;) {
    size_t nl = in.find('\n');
    out.push_back(in.substr(0, nl));
    if (nl == std::string_view::npos) return out;
    in.remove_prefix(nl + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto parts = lines(in);
  if (parts.size() < 3) return 0;
  apus::common::http::HeaderMap headers;
  for (size_t i = 3; i < parts.size(); ++i) {
    size_t colon = parts[i].find(':');
    if (colon == std::string_view::npos) continue;
    headers.add(parts[i].substr(0, colon), parts[i].substr(colon + 1));
  }
  s3::S3AuthRequest req{.method = parts[0],
                        .raw_path = parts[1],
                        .query = parts[2],
                        .headers = &headers,
                        .bucket_in_host = ""};
  const double now = 1796175015;  // 2026-12-02T01:30:15Z
  auto a = s3::parse_s3_auth(req, s3::S3AuthConfig{}, now);
  if (!a.is_s3) {
    if (a.error || a.signature) fail("not S3, yet an answer");
    return 0;
  }
  if (a.error.has_value() == a.signature.has_value()) fail("not exactly one of error and signature");
  if (a.signature) {
    if (a.signature->string_to_sign().empty()) fail("an empty string to sign");
    auto b = s3::parse_s3_auth(req, s3::S3AuthConfig{}, now);
    if (!b.signature || b.signature->string_to_sign() != a.signature->string_to_sign()) {
      fail("the same request read twice differs");
    }
    (void)a.signature->mismatch_details();
    // A secret the fuzzer cannot know: the chance that it signs is nil.
    if (a.signature->check("the secret of nobody 7f3a9c")) fail("a guessed secret checked");
  }
  return 0;
}
