#include "common/crypto/md5.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace apus::common::crypto {
namespace {

TEST_CASE("md5: RFC 1321 test suite") {
  CHECK(md5_hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(md5_hex("a") == "0cc175b9c0f1b6a831c399e269772661");
  CHECK(md5_hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(md5_hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(md5_hex("abcdefghijklmnopqrstuvwxyz") == "c3fcd3d76192e4007dfb496cca67e13b");
  CHECK(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") ==
        "d174ab98d277d9f5a5611c2c9f419d9f");
  std::string digits;
  for (int i = 0; i < 8; ++i) digits += "1234567890";
  CHECK(md5_hex(digits) == "57edf4a22be3c955ac49da2e2107b67a");
}

TEST_CASE("md5: raw digest and hex agree, embedded NULs count") {
  const Md5Digest d = md5(std::string_view("a\0b", 3));
  CHECK(to_hex(d) == md5_hex(std::string_view("a\0b", 3)));
  CHECK(md5_hex(std::string_view("a\0b", 3)) != md5_hex("ab"));
  CHECK(d.size() == 16);
  char buf[4];
  const uint8_t bytes[] = {0x0f, 0xa0};
  write_hex(bytes, buf);
  CHECK(std::string_view(buf, 4) == "0fa0");
}

TEST_CASE("md5: incremental equals one-shot for any split") {
  std::mt19937 rng(42);
  std::string data(200000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const std::string expected = md5_hex(data);
  for (int round = 0; round < 20; ++round) {
    Md5 h;
    size_t pos = 0;
    while (pos < data.size()) {
      const size_t n = std::min<size_t>(data.size() - pos, rng() % 70000);
      if (round % 2 == 0) {
        h.update(std::string_view(data).substr(pos, n));
      } else {
        h.update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()) + pos, n));
      }
      pos += n;
    }
    CHECK(h.hex_digest() == expected);
  }
}

TEST_CASE("md5: digest() keeps the state, reset() starts over, moves transfer it") {
  Md5 h;
  h.update("mess");
  CHECK(h.hex_digest() == md5_hex("mess"));
  CHECK(h.hex_digest() == md5_hex("mess"));  // reading twice changes nothing
  h.update("age digest");
  CHECK(h.hex_digest() == "f96b697d7cb7938d525a2f31aaf161d0");
  CHECK(h.digest() == md5("message digest"));

  h.reset();
  CHECK(h.hex_digest() == "d41d8cd98f00b204e9800998ecf8427e");
  h.update("abc");

  Md5 moved(std::move(h));
  CHECK(moved.hex_digest() == "900150983cd24fb0d6963f7d28e17f72");
  Md5 other;
  other.update("zzz");
  other = std::move(moved);
  other.update("");
  CHECK(other.hex_digest() == "900150983cd24fb0d6963f7d28e17f72");
}

}  // namespace
}  // namespace apus::common::crypto
