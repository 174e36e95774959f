// Strict UTF-8 against Python 3's decoder (the expected values are what
// b.decode("utf-8") accepts and what b.decode("utf-8", "replace") gives).
#include "common/utf8.h"

#include <doctest/doctest.h>

namespace apus::common {
namespace {

TEST_CASE("utf8: valid_utf8 accepts what Python's strict decoder accepts") {
  CHECK(valid_utf8(""));
  CHECK(valid_utf8("plain"));
  CHECK(valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  CHECK(valid_utf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
  CHECK_FALSE(valid_utf8("\xe9"));
  CHECK_FALSE(valid_utf8("\xc3"));              // cut short
  CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(valid_utf8("\xc0\xaf"));          // overlong
  CHECK_FALSE(valid_utf8("\xe0\x80\xaf"));      // overlong
  CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(valid_utf8("\xf8\x88\x80\x80\x80"));
}

TEST_CASE("utf8: utf8_replace puts one U+FFFD for each maximal ill-formed subsequence") {
  const std::string r = "\xef\xbf\xbd";
  CHECK(utf8_replace("a\xc3\xa9z") == "a\xc3\xa9z");
  CHECK(utf8_replace("a\xe9z") == "a" + r + "z");
  // b"\xe2\x82" is one truncated sequence; b"\xed\xa0\x80" three (the surrogate's second byte
  // is out of range at once); b"\xf0\x9f\x98" one.
  CHECK(utf8_replace("\xe2\x82z") == r + "z");
  CHECK(utf8_replace("\xed\xa0\x80") == r + r + r);
  CHECK(utf8_replace("\xf0\x9f\x98") == r);
  CHECK(utf8_replace("\xc0\xaf") == r + r);
}

TEST_CASE("utf8: utf8_sequence gives the length, or minus what one U+FFFD replaces") {
  CHECK(utf8_sequence("a", 0) == 1);
  CHECK(utf8_sequence("\xe2\x82\xac", 0) == 3);
  CHECK(utf8_sequence("\xe2\x82z", 0) == -2);
  CHECK(utf8_sequence("\xff", 0) == -1);
}

}  // namespace
}  // namespace apus::common
