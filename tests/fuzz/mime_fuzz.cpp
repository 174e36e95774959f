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
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/mime.h"

namespace http = apus::common::http;

namespace {

constexpr std::string_view kBoundary = "fuzzboundary";

void fail(const char* what) {
  std::fprintf(stderr, "mime_fuzz: %s\n", what);
  std::abort();
}

struct Outcome {
  std::vector<std::string> bodies;  // each document's body, in order
  bool error = false;
  bool operator==(const Outcome&) const = default;
};

// Splits `input` read `chunk` bytes at a time; with `in_place`, the first document's body is
// read as PutBody reads it (into its own buffer, of at least twice the delimiter).
Outcome split(std::string_view input, size_t chunk, bool in_place) {
  http::MimeSplitter s(kBoundary);
  size_t fed = 0;
  auto more = [&](size_t n) {
    n = std::min(n, input.size() - fed);
    std::string_view got = input.substr(fed, n);
    fed += n;
    return got;
  };
  Outcome out;
  bool in_first_body = false;
  const size_t room = std::max(chunk, 2 * s.delimiter_size());
  for (int guard = 0; guard < 10000000; ++guard) {
    if (in_place && in_first_body) {
      if (auto tail = s.take_body_tail()) {
        if (tail->size() >= s.delimiter_size()) fail("the tail holds a whole delimiter");
        std::string buf(*tail);
        std::string_view fresh = more(room - buf.size());
        if (fresh.empty()) {
          s.feed(buf);
          s.finish();
        } else {
          buf += fresh;
          size_t body = s.body_in_place(buf);
          if (body > buf.size()) fail("body_in_place beyond its region");
          out.bodies.back() += buf.substr(0, body);
        }
        continue;
      }
    }
    switch (s.next()) {
      case http::MimeSplitter::Event::kNeedMore:
        if (fed >= input.size()) {
          s.finish();
        } else {
          s.feed(more(chunk));
        }
        break;
      case http::MimeSplitter::Event::kHeaders:
        out.bodies.emplace_back();
        in_first_body = out.bodies.size() == 1;
        break;
      case http::MimeSplitter::Event::kData:
        if (out.bodies.empty()) fail("data outside a document");
        out.bodies.back() += s.data();
        break;
      case http::MimeSplitter::Event::kEndOfDocument:
        in_first_body = false;
        break;
      case http::MimeSplitter::Event::kEnd:
        return out;
      case http::MimeSplitter::Event::kError:
        out.error = true;
        return out;
    }
  }
  fail("the splitter never ended");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t chunk = 1 + static_cast<size_t>(data[0]) * 7;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  Outcome fed = split(input, chunk, false);
  Outcome in_place = split(input, chunk, true);
  if (!(fed == in_place)) fail("the in-place body path and the fed path disagree");
  return 0;
}
