#include "common/crypto/crc32c.h"

#include <random>
#include <string>

#include <doctest/doctest.h>

namespace apus::common::crypto {
namespace {

TEST_CASE("crc32c: known values (RFC 3720 B.4 and the usual check string)") {
  CHECK(crc32c_hex("") == "00000000");
  CHECK(crc32c_hex("123456789") == "e3069283");
  CHECK(crc32c_hex(std::string(32, '\0')) == "8a9136aa");
  CHECK(crc32c_hex(std::string(32, '\xff')) == "62a8ab43");
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  CHECK(crc32c_hex(ascending) == "46dd794e");
}

TEST_CASE("crc32c: incremental equals one-shot for any split, and one flipped bit shows") {
  std::mt19937 rng(7);
  std::string data(100000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const std::string whole = crc32c_hex(data);
  for (int i = 0; i < 50; ++i) {
    size_t a = rng() % data.size(), b = rng() % data.size();
    if (a > b) std::swap(a, b);
    Crc32c crc;
    crc.update(std::string_view(data).substr(0, a));
    crc.update(std::string_view(data).substr(a, b - a));
    crc.update(std::string_view(data).substr(b));
    CHECK(crc.hex() == whole);
  }
  std::string flipped = data;
  flipped[rng() % flipped.size()] ^= 0x10;
  CHECK(crc32c_hex(flipped) != whole);
}

TEST_CASE("crc32c: parsing the hex form") {
  CHECK(parse_crc32c_hex("e3069283") == 0xe3069283u);
  CHECK(parse_crc32c_hex("E3069283") == 0xe3069283u);
  CHECK(parse_crc32c_hex("00000000") == 0u);
  CHECK_FALSE(parse_crc32c_hex("e306928"));
  CHECK_FALSE(parse_crc32c_hex("e30692830"));
  CHECK_FALSE(parse_crc32c_hex("e306928g"));
  CHECK_FALSE(parse_crc32c_hex(" e306928"));
  CHECK_FALSE(parse_crc32c_hex(""));
}

}  // namespace
}  // namespace apus::common::crypto
