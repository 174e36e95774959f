#include "common/crypto/aes_ctr.h"

#include <string>

#include <doctest/doctest.h>

namespace apus::common::crypto {
namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// NIST SP 800-38A, F.5.5 (CTR-AES256.Encrypt): its counter ends in ff, so the second block
// carries into the byte before.
const std::string kKey = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
const std::string kIv = unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
const std::string kPlain = unhex(
    "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
const std::string kCipher = unhex(
    "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
    "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6");

TEST_CASE("aes_ctr: NIST SP 800-38A vectors, whole and in odd pieces") {
  CHECK(aes_ctr(kKey, kIv, kPlain) == kCipher);
  CHECK(aes_ctr(kKey, kIv, kCipher) == kPlain);
  AesCtr stream(kKey, kIv);
  std::string out;
  for (size_t at = 0, piece = 1; at < kPlain.size(); at += piece, piece += 3) {
    out += stream.apply(std::string_view(kPlain).substr(at, piece));
  }
  CHECK(out == kCipher);
}

TEST_CASE("aes_ctr: a stream may start at any offset of the message") {
  for (uint64_t offset : {0, 1, 15, 16, 17, 31, 32, 50, 63}) {
    AesCtr stream(kKey, kIv, offset);
    CHECK(stream.apply(std::string_view(kCipher).substr(offset)) == kPlain.substr(offset));
  }
}

TEST_CASE("aes_ctr: the counter wraps at 2^128") {
  const std::string all_ones(16, '\xff');
  const std::string zero(16, '\0');
  std::string data(48, 'x');
  std::string from_start = aes_ctr(kKey, all_ones, data);
  // The block after ff..ff is 00..00.
  CHECK(std::string_view(from_start).substr(16) == aes_ctr(kKey, zero, data.substr(16)));
  AesCtr late(kKey, all_ones, 20);
  CHECK(late.apply(std::string_view(data).substr(20)) == from_start.substr(20));
}

}  // namespace
}  // namespace apus::common::crypto
