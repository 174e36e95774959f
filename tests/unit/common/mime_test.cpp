#include "common/http/mime.h"
#include "tests/support/mime_split.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace {

using apus::common::http::MimeSplitter;

struct Document {
  std::string x_document;  // the X-Document header
  std::string content_md5;
  std::string body;
};

struct Split {
  std::vector<Document> docs;
  bool complete = false;  // every document ended and kEnd came
  std::string error;
};

// Feeds `input` `chunk` bytes at a time and collects what the splitter hands out.
Split split(const std::string& input, const std::string& boundary, size_t chunk) {
  MimeSplitter s(boundary);
  Split out;
  size_t fed = 0;
  bool in_document = false;
  for (int guard = 0; guard < 1000000; ++guard) {
    switch (s.next()) {
      case MimeSplitter::Event::kNeedMore:
        if (fed >= input.size()) {
          s.finish();
        } else {
          size_t n = std::min(chunk, input.size() - fed);
          s.feed(std::string_view(input).substr(fed, n));
          fed += n;
        }
        break;
      case MimeSplitter::Event::kHeaders:
        REQUIRE_FALSE(in_document);
        in_document = true;
        out.docs.push_back({std::string(s.headers().get_or("X-Document", "")),
                            std::string(s.headers().get_or("Content-MD5", "")), ""});
        break;
      case MimeSplitter::Event::kData:
        REQUIRE(in_document);
        REQUIRE_FALSE(s.data().empty());
        out.docs.back().body += s.data();
        break;
      case MimeSplitter::Event::kEndOfDocument:
        REQUIRE(in_document);
        in_document = false;
        break;
      case MimeSplitter::Event::kEnd:
        out.complete = !in_document;
        return out;
      case MimeSplitter::Event::kError:
        out.error = s.error();
        return out;
    }
  }
  FAIL("the splitter never ended");
  return out;
}

// What Swift's proxy sends for a PUT with metadata footers (MIMEPutter, no multiphase).
std::string footer_put(const std::string& b, const std::string& body, const std::string& json) {
  return "--" + b + "\r\nX-Document: object body\r\n\r\n" + body + "\r\n--" + b +
         "\r\nX-Document: object metadata\r\nContent-MD5: 0123\r\n\r\n" + json + "\r\n--" + b +
         "--\r\n";
}

}  // namespace

TEST_CASE("MimeSplitter splits Swift's footer PUT body whatever the read sizes") {
  const std::string b = std::string(64, 'f');
  // A body that holds near-delimiters: CRLF, dashes and most of the boundary.
  std::string body =
      "start\r\n--" + b.substr(0, 63) + "x\r\n-\r\n--\r\n" + std::string(5000, 'z') + "\r\n";
  std::string input = footer_put(b, body, "{\"Etag\": \"abc\"}");
  for (size_t chunk : {1, 2, 3, 7, 64, 65, 66, 67, 100, 4096, 1 << 20}) {
    CAPTURE(chunk);
    Split got = split(input, b, chunk);
    CHECK(got.error.empty());
    CHECK(got.complete);
    REQUIRE(got.docs.size() == 2);
    CHECK(got.docs[0].x_document == "object body");
    CHECK(got.docs[0].body == body);
    CHECK(got.docs[1].x_document == "object metadata");
    CHECK(got.docs[1].content_md5 == "0123");
    CHECK(got.docs[1].body == "{\"Etag\": \"abc\"}");
  }
}

TEST_CASE("MimeSplitter reads the multiphase commit document after the footer") {
  const std::string b = "boundary42";
  // Footer ends in "--b\r\n" (more to come); the commit document ends the body, with no CRLF.
  std::string input = "--" + b + "\r\nX-Document: object body\r\n\r\nDATA\r\n--" + b +
                      "\r\nX-Document: object metadata\r\nContent-MD5: m\r\n\r\n{}\r\n--" + b +
                      "\r\nX-Document: put commit\r\n\r\nput_commit_confirmation\r\n--" + b + "--";
  for (size_t chunk : {1, 5, 1000}) {
    Split got = split(input, b, chunk);
    CHECK(got.complete);
    REQUIRE(got.docs.size() == 3);
    CHECK(got.docs[0].body == "DATA");
    CHECK(got.docs[1].body == "{}");
    CHECK(got.docs[2].x_document == "put commit");
    CHECK(got.docs[2].body == "put_commit_confirmation");
  }
}

TEST_CASE("MimeSplitter edge cases") {
  const std::string b = "bb";
  SUBCASE("blank lines before the first boundary are skipped") {
    Split got = split("\r\n\r\n--bb\r\nX-Document: x\r\n\r\nhi\r\n--bb--", b, 3);
    CHECK(got.complete);
    REQUIRE(got.docs.size() == 1);
    CHECK(got.docs[0].body == "hi");
  }
  SUBCASE("a wrong first boundary is an error") {
    CHECK_FALSE(split("--cc\r\n\r\nhi\r\n--cc--", b, 4).error.empty());
    CHECK_FALSE(split("junk", b, 4).error.empty());
    CHECK_FALSE(split("", b, 4).error.empty());
  }
  SUBCASE("a body without a closing boundary ends at the end of input") {
    Split got = split("--bb\r\nX-Document: object body\r\n\r\nunterminated", b, 2);
    CHECK(got.error.empty());
    REQUIRE(got.docs.size() == 1);
    CHECK(got.docs[0].body == "unterminated");
  }
  SUBCASE("empty documents and headerless documents") {
    Split got = split("--bb\r\n\r\n\r\n--bb\r\nX-Document: e\r\n\r\n\r\n--bb--\r\nepilogue", b, 1);
    CHECK(got.complete);
    REQUIRE(got.docs.size() == 2);
    CHECK(got.docs[0].x_document.empty());
    CHECK(got.docs[0].body.empty());
    CHECK(got.docs[1].x_document == "e");
    CHECK(got.docs[1].body.empty());
  }
  SUBCASE("endless headers are refused") {
    std::string input = "--bb\r\nX-Document: " + std::string(100000, 'h');
    CHECK(split(input, b, 4096).error == "MIME document headers too long");
  }
  SUBCASE("the buffer stays small while a large body passes") {
    MimeSplitter s(b);
    s.feed("--bb\r\nX-Document: object body\r\n\r\n");
    REQUIRE(s.next() == MimeSplitter::Event::kHeaders);
    std::string piece(65536, 'a');
    for (int i = 0; i < 64; ++i) {
      s.feed(piece);
      while (s.next() == MimeSplitter::Event::kData) {
      }
      CHECK(s.buffered() < 8);
    }
  }
}

TEST_CASE("MimeSplitter: the in-place body path splits as feeding does, whatever the reads") {
  const std::string b = std::string(32, 'a') + "0123";
  std::string body = "start\r\n--" + b.substr(0, 30) + "\r\n--" + b.substr(0, 35) + "x\r\n" +
                     std::string(3000, 'z') + "\r\n-";
  for (const std::string& payload : {body, std::string(), std::string("\r"),
                                     std::string(100000, 'q') + "\r\n--" + b.substr(0, 20)}) {
    std::string input = footer_put(b, payload, "{\"Etag\": \"abc\"}");
    for (size_t chunk : {1, 2, 3, 39, 40, 41, 42, 80, 81, 100, 4096, 65536}) {
      CAPTURE(chunk);
      CAPTURE(payload.size());
      apus::test::MimeOutcome got = apus::test::split_mime(input, b, chunk, true);
      CHECK(got.broken.empty());
      CHECK_FALSE(got.error);
      REQUIRE(got.bodies.size() == 2);
      CHECK(got.bodies[0] == payload);
      CHECK(got.bodies[1] == "{\"Etag\": \"abc\"}");
      CHECK(got == apus::test::split_mime(input, b, chunk, false));
    }
  }
}
