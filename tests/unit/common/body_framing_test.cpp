#include "common/http/body_framing.h"

#include <algorithm>
#include <string>

#include <doctest/doctest.h>

#include "tests/support/framed_read.h"

namespace {

using apus::common::http::BodyFraming;

struct Decoded {
  std::string body;
  size_t consumed = 0;  // bytes of the input that belonged to the message
  bool done = false;
  bool failed = false;
};

// Reads `input` arriving `step` bytes at a time; its end is the peer's close.
Decoded decode(BodyFraming framing, const std::string& input, size_t step) {
  apus::test::FramedRead r = apus::test::read_framed(framing, input, step, true);
  REQUIRE(r.broken.empty());
  return Decoded{r.body, r.consumed, r.end == apus::test::FramedRead::End::kDone,
                 r.end == apus::test::FramedRead::End::kFailed};
}

// The same result whatever the pieces the input arrives in.
Decoded decode_chunked(const std::string& input) {
  Decoded whole = decode(BodyFraming::chunked(), input, input.size() + 1);
  for (size_t step = 1; step <= input.size(); ++step) {
    Decoded d = decode(BodyFraming::chunked(), input, step);
    CHECK_MESSAGE(d.body == whole.body, "step " << step);
    CHECK_MESSAGE(d.done == whole.done, "step " << step);
    CHECK_MESSAGE(d.failed == whole.failed, "step " << step);
    if (d.done) CHECK_MESSAGE(d.consumed == whole.consumed, "step " << step);
  }
  return whole;
}

}  // namespace

TEST_CASE("BodyFraming: a chunked body ends where its last chunk and trailers end") {
  const std::string body = "4\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n";
  Decoded d = decode_chunked(body + "GET / HTTP/1.1\r\n");
  CHECK(d.done);
  CHECK(d.body == "Wikipedia in\r\n\r\nchunks.");
  CHECK(d.consumed == body.size());  // a pipelined request stays unread
}

TEST_CASE("BodyFraming: chunk sizes in either case, with leading zeros and extensions") {
  CHECK(decode_chunked("00a\r\n0123456789\r\n0\r\n\r\n").body == "0123456789");
  CHECK(decode_chunked("A\r\n0123456789\r\n0\r\n\r\n").body == "0123456789");
  Decoded d = decode_chunked("3;name\r\nabc\r\n2 ; a = b;c=\"q\\\"x\"\r\nde\r\n000;x\r\n\r\n");
  CHECK(d.done);
  CHECK(d.body == "abcde");
}

TEST_CASE("BodyFraming: trailers are checked and dropped") {
  Decoded d = decode_chunked("1\r\nx\r\n0\r\nX-Trailer: v\r\nFolded: a\r\n b\r\n\r\n");
  CHECK(d.done);
  CHECK(d.body == "x");
  CHECK(decode_chunked("0\r\nno colon\r\n\r\n").failed);
  CHECK(decode_chunked("0\r\n continued: first\r\n\r\n").failed);
  CHECK(decode_chunked("0\r\n: empty name\r\n\r\n").failed);
  CHECK(decode_chunked("0\r\nA: b\x01\r\n\r\n").failed);
}

TEST_CASE("BodyFraming: malformed chunked framing is an error") {
  CHECK(decode_chunked("\r\nabc\r\n0\r\n\r\n").failed);       // no size
  CHECK(decode_chunked("x\r\n").failed);                      // not hex
  CHECK(decode_chunked("4\nWiki\r\n0\r\n\r\n").failed);       // a bare LF is no line end
  CHECK(decode_chunked("4\rX\nWiki\r\n0\r\n\r\n").failed);    // a CR inside the line
  CHECK(decode_chunked("4\r\nWikiXX0\r\n\r\n").failed);       // no CRLF after the data
  CHECK(decode_chunked("4 \r\nWiki\r\n0\r\n\r\n").failed);    // space without extension
  CHECK(decode_chunked("4;\r\nWiki\r\n0\r\n\r\n").failed);    // extension without name
  CHECK(decode_chunked("4;a \r\nWiki\r\n0\r\n\r\n").failed);  // space ending the line
  CHECK(decode_chunked("4;a=\"open\r\nWiki\r\n0\r\n\r\n").failed);
  CHECK(decode_chunked("10000000000000000\r\n").failed);    // past 2^64 - 1
  Decoded big = decode_chunked("ffffffffffffffff\r\nabc");  // the largest size is fine
  CHECK(big.failed);                                        // ... but the body ends early
  CHECK(big.body == "abc");
}

TEST_CASE("BodyFraming: a failure says why, for the reader's error") {
  BodyFraming f = BodyFraming::chunked();
  CHECK(f.parse("4\r\nWikiXX") == 3);  // the size line: the data is the reader's to take
  CHECK(f.data_ahead() == 4);
  f.took(4);
  f.parse("XX");
  CHECK(f.failed());
  CHECK(std::string(f.error()) == "no CRLF after a chunk's data");
  BodyFraming cut = BodyFraming::length(3);
  cut.peer_closed();
  CHECK(std::string(cut.error()) == "the peer closed before the body's end");
}

TEST_CASE("BodyFraming: framing lines are bounded") {
  const std::string ext(BodyFraming::kMaxLineBytes, 'a');
  CHECK(decode(BodyFraming::chunked(), "1;" + ext + "\r\nx\r\n0\r\n\r\n", 512).failed);
  CHECK(decode(BodyFraming::chunked(), "1;" + ext, 512).failed);  // fails before the line ends
  std::string trailers = "0\r\n";
  while (trailers.size() <= BodyFraming::kMaxTrailerBytes) {
    trailers += "X-A: " + std::string(100, 'a') + "\r\n";
  }
  CHECK(decode(BodyFraming::chunked(), trailers + "\r\n", 4096).failed);
  const std::string fits(BodyFraming::kMaxLineBytes - 4, 'a');
  CHECK(decode(BodyFraming::chunked(), "1;" + fits + "\r\nx\r\n0\r\n\r\n", 512).done);
}

TEST_CASE("BodyFraming: a body cut short fails, one read to the close ends there") {
  CHECK(decode_chunked("4\r\nWi").failed);
  CHECK(decode_chunked("4\r\nWiki\r\n").failed);
  CHECK(decode_chunked("4\r\nWiki\r\n0\r\n").failed);
  Decoded cut = decode(BodyFraming::length(10), "01234", 2);
  CHECK(cut.failed);
  CHECK(cut.body == "01234");
  Decoded all = decode(BodyFraming::until_close(), "0123456789", 3);
  CHECK(all.done);
  CHECK(all.body == "0123456789");
}

TEST_CASE("BodyFraming: a Content-Length body takes exactly its length") {
  Decoded d = decode(BodyFraming::length(5), "HelloGET /", 3);
  CHECK(d.done);
  CHECK(d.body == "Hello");
  CHECK(d.consumed == 5);
  CHECK(BodyFraming::length(0).done());
  CHECK(BodyFraming::none().done());
  CHECK(BodyFraming::length(7).data_ahead() == 7);
  CHECK(BodyFraming::chunked().data_ahead() == 0);
}
