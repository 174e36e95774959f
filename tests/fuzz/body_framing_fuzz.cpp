// Fuzzes common/http/body_framing.h's BodyFraming with a chunked body, as every server reads a
// chunked request (the proxy's PUTs to object servers, clients' uploads) and the proxy reads a
// chunked answer, against Beast's parser, which did that framing before.
//
// Input: the first byte sets the read size (1 + byte, as the bytes arrive from the socket);
// the rest is the body after a "Transfer-Encoding: chunked" head. Inputs stay under
// BodyFraming's line bound (kMaxLineBytes), where the two should agree exactly:
// - a body Beast's parser completes, BodyFraming completes with the same bytes, ending at the
//   same place (what follows is the next pipelined request);
// - a body Beast refuses, BodyFraming refuses;
// - a body Beast still waits on, BodyFraming does not complete.
// And whatever the read size, BodyFraming gives the same outcome.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "common/http/body_framing.h"
#include "tests/support/framed_read.h"

namespace {

using apus::common::http::BodyFraming;
namespace bhttp = boost::beast::http;

void fail(const char* what) {
  std::fprintf(stderr, "body_framing_fuzz: %s\n", what);
  std::abort();
}

using Outcome = apus::test::FramedRead;

Outcome beast(std::string_view input) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string message = head + std::string(input);
  bhttp::request_parser<bhttp::string_body> parser;
  parser.eager(true);
  parser.body_limit(boost::none);
  parser.header_limit(1 << 20);
  Outcome out;
  size_t used = 0;
  while (!parser.is_done()) {
    boost::beast::error_code ec;
    const size_t n =
        parser.put(boost::asio::buffer(message.data() + used, message.size() - used), ec);
    used += n;
    if (ec == bhttp::error::need_more) return out;
    if (ec) {
      out.end = Outcome::End::kFailed;
      return out;
    }
    if (n == 0) return out;
  }
  out.end = Outcome::End::kDone;
  out.body = parser.get().body();
  out.consumed = used - head.size();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > BodyFraming::kMaxLineBytes) return 0;
  const size_t step = 1 + static_cast<size_t>(data[0]);
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome mine = apus::test::read_framed(BodyFraming::chunked(), input, step, false);
  const Outcome whole =
      apus::test::read_framed(BodyFraming::chunked(), input, input.size() + 1, false);
  if (!mine.broken.empty()) fail(mine.broken.c_str());
  if (!(mine == whole)) fail("the outcome depends on the read size");
  const Outcome theirs = beast(input);
  switch (theirs.end) {
    case Outcome::End::kDone:
      if (mine.end != Outcome::End::kDone) fail("Beast completes a body BodyFraming does not");
      if (mine.body != theirs.body) fail("the bodies differ");
      if (mine.consumed != theirs.consumed) fail("the bodies end at different places");
      break;
    case Outcome::End::kFailed:
      if (mine.end != Outcome::End::kFailed) fail("Beast refuses a body BodyFraming does not");
      break;
    case Outcome::End::kWaiting:
      if (mine.end == Outcome::End::kDone) fail("BodyFraming completes a body Beast waits on");
      break;
  }
  return 0;
}
