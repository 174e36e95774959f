// S3 checksums (proxy/s3api/checksum.h): the standard check values of each algorithm
// ("123456789"), the same digest whatever the pieces, and the base64 forms S3 sends.
#include "proxy/s3api/checksum.h"

#include <doctest/doctest.h>

#include "common/crypto/base64.h"

#include <random>
#include <string>

namespace {

using apus::proxy::s3api::Checksum;
using apus::proxy::s3api::checksum_algorithm_of;
using apus::proxy::s3api::checksum_size;
using apus::proxy::s3api::ChecksumAlgorithm;
using apus::proxy::s3api::decode_checksum;

std::string hex(const std::string& bytes) {
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(k[c >> 4]);
    out.push_back(k[c & 15]);
  }
  return out;
}

std::string digest_of(ChecksumAlgorithm a, const std::string& data) {
  Checksum c(a);
  c.update(data);
  return c.digest();
}

}  // namespace

TEST_CASE("checksums: the catalogue check values") {
  const std::string check = "123456789";
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc32, check)) == "cbf43926");
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc32c, check)) == "e3069283");
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc64Nvme, check)) == "ae8b14860a799888");
  CHECK(hex(digest_of(ChecksumAlgorithm::kSha1, "abc")) ==
        "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(hex(digest_of(ChecksumAlgorithm::kSha256, "abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Nothing at all.
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc32, "")) == "00000000");
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc32c, "")) == "00000000");
  CHECK(hex(digest_of(ChecksumAlgorithm::kCrc64Nvme, "")) == "0000000000000000");
}

TEST_CASE("checksums: pieces of any size give the digest of the whole") {
  std::mt19937 rng(7);
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (auto a : {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
                 ChecksumAlgorithm::kCrc64Nvme, ChecksumAlgorithm::kSha1,
                 ChecksumAlgorithm::kSha256}) {
    const std::string whole = digest_of(a, data);
    CHECK(whole.size() == checksum_size(a));
    Checksum pieces(a);
    size_t at = 0;
    while (at < data.size()) {
      size_t n = std::min<size_t>(data.size() - at, 1 + rng() % 9000);
      pieces.update(std::string_view(data).substr(at, n));
      at += n;
    }
    CHECK(pieces.digest() == whole);
  }
}

TEST_CASE("checksums: header names and base64 values") {
  CHECK(checksum_algorithm_of("X-Amz-Checksum-CRC32") == ChecksumAlgorithm::kCrc32);
  CHECK(checksum_algorithm_of("x-amz-checksum-crc64nvme") == ChecksumAlgorithm::kCrc64Nvme);
  CHECK(!checksum_algorithm_of("x-amz-checksum-md5"));
  CHECK(!checksum_algorithm_of("x-amz-checksum-algorithm"));
  // CRC32 of "hello" as botocore sends it.
  CHECK(apus::common::crypto::b64encode(digest_of(ChecksumAlgorithm::kCrc32, "hello")) == "NhCmhg==");
  auto raw = decode_checksum("NhCmhg==", 4);
  REQUIRE(raw);
  CHECK(hex(*raw) == "3610a686");
  CHECK(!decode_checksum("NhCmhg=", 4));      // not padded
  CHECK(!decode_checksum("NhCmhgAA", 4));     // 6 bytes
  CHECK(!decode_checksum("Nh*mhg==", 4));     // not base64
  CHECK(!decode_checksum("", 4));
}

TEST_CASE("checksums: CRCs of pieces combine into the whole's") {
  using apus::proxy::s3api::combine_crc;
  std::mt19937_64 rng(7);
  std::string data(70000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (ChecksumAlgorithm a : {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
                              ChecksumAlgorithm::kCrc64Nvme}) {
    CAPTURE(static_cast<int>(a));
    for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{65537}, data.size()}) {
      CAPTURE(cut);
      const std::string first = data.substr(0, cut), second = data.substr(cut);
      CHECK(combine_crc(a, digest_of(a, first), digest_of(a, second), second.size()) ==
            digest_of(a, data));
    }
    // Three pieces, folded left to right, as parts of an upload are.
    std::string whole = digest_of(a, data.substr(0, 10));
    whole = combine_crc(a, whole, digest_of(a, data.substr(10, 20000)), 20000);
    whole = combine_crc(a, whole, digest_of(a, data.substr(20010)), data.size() - 20010);
    CHECK(whole == digest_of(a, data));
  }
}
