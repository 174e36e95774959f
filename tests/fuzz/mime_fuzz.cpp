// Fuzzes common/http/mime.h's MimeSplitter with what an object server's PUT peer controls: the
// MIME body of a PUT with metadata footers (Swift's and Apus's proxies send one for every
// footer PUT), split into reads of sizes the input chooses.
//
// Input: the first byte sets the read size (1 + byte * 7, up to 1786 bytes); the rest is the
// body, its boundary fixed to "fuzzboundary" (the seed corpus holds well-formed bodies).
//
// Besides the sanitizers, it checks that the two ways the object server reads a document's
// body agree: every byte fed to the splitter and handed out by next(), or read into the
// reader's own buffer behind take_body_tail() and cut by body_in_place(). Both must give the
// same documents, the same bodies, and the same outcome (end or error).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tests/support/mime_split.h"

namespace {

constexpr std::string_view kBoundary = "fuzzboundary";

void fail(const char* what) {
  std::fprintf(stderr, "mime_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + static_cast<size_t>(data[0]) * 7;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  apus::test::MimeOutcome fed = apus::test::split_mime(input, kBoundary, chunk, false);
  apus::test::MimeOutcome in_place = apus::test::split_mime(input, kBoundary, chunk, true);
  if (!fed.broken.empty()) fail(fed.broken.c_str());
  if (!in_place.broken.empty()) fail(in_place.broken.c_str());
  if (!(fed == in_place)) fail("the in-place body path and the fed path disagree");
  return 0;
}
