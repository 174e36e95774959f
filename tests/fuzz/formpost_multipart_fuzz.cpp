// Fuzzes the multipart/form-data reader formpost runs on a client's body (proxy/multipart.h):
// the first byte picks the boundary's length and the chunk sizes, the rest is the body.
//
// Besides the sanitizers, it checks that the parser holds no more than its bound, that data
// handed out never contains the delimiter, that every part ends, and that the parts, headers
// and data are the same whether the body arrives a byte at a time or in large chunks.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/multipart.h"

namespace mp = apus::proxy::multipart;
using Step = mp::Parser::Step;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "formpost_multipart_fuzz: %s\n", what);
  std::abort();
}

// Everything the parser says about `body`, fed `chunk` bytes at a time, read `max` at a time.
std::string run(std::string_view boundary, std::string_view body, size_t chunk, size_t max) {
  mp::Parser p(boundary);
  const std::string delim = "\r\n--" + std::string(boundary);
  size_t at = 0;
  size_t steps = 0;
  auto more = [&]() {
    if (++steps > 10 * (body.size() + 10)) fail("no progress");
    if (at == body.size()) {
      if (p.finished()) fail("asked for more after the end");
      p.finish();
      return;
    }
    size_t n = std::min({chunk, body.size() - at, p.room()});
    if (n == 0) fail("no room while asking for more");
    p.feed(body.substr(at, n));
    at += n;
    if (p.buffered() > mp::kBufferCapacity + delim.size() + 4) fail("buffer over its bound");
  };
  std::string out;
  Step s;
  while ((s = p.start()) == Step::kNeedMore) more();
  if (s != Step::kReady) return "invalid";
  for (int parts = 0;; ++parts) {
    std::vector<std::string> lines;
    while ((s = p.read_headers(&lines)) == Step::kNeedMore) more();
    if (s == Step::kTooLong) return out + "|too long";
    if (s != Step::kReady) fail("read_headers step");
    mp::MimeHeaders h = mp::MimeHeaders::parse(lines);
    for (const char* name : {"Content-Disposition", "Content-Type", "Content-Encoding"}) {
      if (auto v = h.get(name)) {
        mp::Disposition d = mp::parse_content_disposition(*v);
        out += d.type + ";";
        for (const auto& [k, val] : d.attrs) out += k + "=" + val + ";";
      }
    }
    out += "|";
    std::string data;
    while (true) {
      std::string_view d;
      s = p.read_data(max, &d);
      if (s == Step::kNeedMore) {
        more();
        continue;
      }
      if (s == Step::kEnd) break;
      if (s != Step::kReady || d.empty() || d.size() > max) fail("read_data step");
      data.append(d);
    }
    if (data.find(delim) != std::string::npos) fail("delimiter inside a part's data");
    (void)mp::valid_utf8(data);
    out += data + "\n";
    if (!p.more_parts()) break;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t blen = 1 + data[0] % 8;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (rest.size() < blen) return 0;
  std::string_view boundary = rest.substr(0, blen);
  std::string_view body = rest.substr(blen);
  const std::string one = run(boundary, body, 1, 1);
  const std::string big = run(boundary, body, 65536, 4096);
  const std::string odd = run(boundary, body, 7, 3);
  if (one != big || one != odd) fail("the answer depends on how the body is split");
  return 0;
}
