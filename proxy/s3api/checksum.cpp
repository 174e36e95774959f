#include "proxy/s3api/checksum.h"

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include <array>
#include <cctype>
#include <cstring>

#include "common/assert.h"
#include "common/crypto/base64.h"
#include "common/http/headers.h"

namespace apus::proxy::s3api {

namespace {

// CRC-64/NVME: reflected polynomial 0x9a6c9329ac4bc9b5, init and final xor all ones. Eight
// tables let the loop take eight bytes a step.
constexpr uint64_t kCrc64NvmePoly = 0x9a6c9329ac4bc9b5ULL;

struct Crc64Tables {
  std::array<std::array<uint64_t, 256>, 8> t{};
  Crc64Tables() {
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc64NvmePoly : c >> 1;
      t[0][i] = c;
    }
    for (size_t i = 0; i < 256; ++i) {
      for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};

uint64_t crc64_nvme_update(uint64_t crc, const unsigned char* p, size_t n) {
  static const Crc64Tables tables;
  const auto& t = tables.t;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // little-endian hosts (x86-64, arm64)
    crc ^= v;
    crc = t[7][crc & 0xFF] ^ t[6][(crc >> 8) & 0xFF] ^ t[5][(crc >> 16) & 0xFF] ^
          t[4][(crc >> 24) & 0xFF] ^ t[3][(crc >> 32) & 0xFF] ^ t[2][(crc >> 40) & 0xFF] ^
          t[1][(crc >> 48) & 0xFF] ^ t[0][crc >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

std::string big_endian(uint64_t v, size_t bytes) {
  std::string out(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) out[bytes - 1 - i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

}  // namespace

struct Checksum::Hash {
  EVP_MD_CTX* ctx = nullptr;
  ~Hash() { EVP_MD_CTX_free(ctx); }
};

std::optional<ChecksumAlgorithm> checksum_algorithm_of(std::string_view header) {
  std::string h = common::http::to_lower(header);
  if (h == "x-amz-checksum-crc32") return ChecksumAlgorithm::kCrc32;
  if (h == "x-amz-checksum-crc32c") return ChecksumAlgorithm::kCrc32c;
  if (h == "x-amz-checksum-crc64nvme") return ChecksumAlgorithm::kCrc64Nvme;
  if (h == "x-amz-checksum-sha1") return ChecksumAlgorithm::kSha1;
  if (h == "x-amz-checksum-sha256") return ChecksumAlgorithm::kSha256;
  return std::nullopt;
}

std::string_view checksum_name(ChecksumAlgorithm a) {
  switch (a) {
    case ChecksumAlgorithm::kCrc32: return "crc32";
    case ChecksumAlgorithm::kCrc32c: return "crc32c";
    case ChecksumAlgorithm::kCrc64Nvme: return "crc64nvme";
    case ChecksumAlgorithm::kSha1: return "sha1";
    case ChecksumAlgorithm::kSha256: return "sha256";
  }
  return "";
}

size_t checksum_size(ChecksumAlgorithm a) {
  switch (a) {
    case ChecksumAlgorithm::kCrc32:
    case ChecksumAlgorithm::kCrc32c: return 4;
    case ChecksumAlgorithm::kCrc64Nvme: return 8;
    case ChecksumAlgorithm::kSha1: return 20;
    case ChecksumAlgorithm::kSha256: return 32;
  }
  return 0;
}

Checksum::Checksum(ChecksumAlgorithm algorithm) : algorithm_(algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kCrc32:
      crc_ = 0;
      break;
    case ChecksumAlgorithm::kCrc32c:  // crc32c_ starts where CRC32C starts
      break;
    case ChecksumAlgorithm::kCrc64Nvme:
      crc_ = ~uint64_t{0};
      break;
    case ChecksumAlgorithm::kSha1:
    case ChecksumAlgorithm::kSha256:
      hash_ = std::make_unique<Hash>();
      hash_->ctx = EVP_MD_CTX_new();
      APUS_CHECK(hash_->ctx != nullptr);
      APUS_CHECK(EVP_DigestInit_ex(hash_->ctx,
                                   algorithm == ChecksumAlgorithm::kSha1 ? EVP_sha1()
                                                                         : EVP_sha256(),
                                   nullptr) == 1);
      break;
  }
}

Checksum::~Checksum() = default;

void Checksum::update(std::string_view data) {
  auto* p = reinterpret_cast<const unsigned char*>(data.data());
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
      crc_ = crc32_gzip_refl(static_cast<uint32_t>(crc_), p, data.size());
      break;
    case ChecksumAlgorithm::kCrc32c:
      crc32c_.update(data);
      break;
    case ChecksumAlgorithm::kCrc64Nvme:
      crc_ = crc64_nvme_update(crc_, p, data.size());
      break;
    default:
      APUS_CHECK(EVP_DigestUpdate(hash_->ctx, data.data(), data.size()) == 1);
  }
}

std::string Checksum::digest() const {
  switch (algorithm_) {
    case ChecksumAlgorithm::kCrc32:
      return big_endian(crc_, 4);
    case ChecksumAlgorithm::kCrc32c:
      return big_endian(crc32c_.value(), 4);
    case ChecksumAlgorithm::kCrc64Nvme:
      return big_endian(~crc_, 8);
    default: {
      EVP_MD_CTX* copy = EVP_MD_CTX_new();
      APUS_CHECK(copy != nullptr && EVP_MD_CTX_copy_ex(copy, hash_->ctx) == 1);
      unsigned char out[EVP_MAX_MD_SIZE];
      unsigned int len = 0;
      APUS_CHECK(EVP_DigestFinal_ex(copy, out, &len) == 1);
      EVP_MD_CTX_free(copy);
      return std::string(reinterpret_cast<const char*>(out), len);
    }
  }
}

bool is_crc(ChecksumAlgorithm a) {
  return a == ChecksumAlgorithm::kCrc32 || a == ChecksumAlgorithm::kCrc32c ||
         a == ChecksumAlgorithm::kCrc64Nvme;
}

namespace {

// Arithmetic on polynomials over GF(2) modulo a CRC's polynomial, in the CRC's reflected bit
// order: the top bit of a `width`-bit word is x^0.
struct CrcField {
  uint64_t poly;  // reflected
  int width;

  uint64_t one() const { return uint64_t{1} << (width - 1); }

  // a(x) * b(x) mod p(x).
  uint64_t multiply(uint64_t a, uint64_t b) const {
    uint64_t product = 0;
    for (uint64_t m = one(); m != 0 && a != 0; m >>= 1) {
      if (a & m) {
        product ^= b;
        a &= ~m;
      }
      b = (b & 1) ? (b >> 1) ^ poly : b >> 1;
    }
    return product;
  }

  // x^(8 * bytes) mod p(x), by squaring: x^(2^k) for each set bit of 8 * bytes.
  uint64_t x_to_bytes(uint64_t bytes) const {
    uint64_t result = one();
    uint64_t power = one() >> 8;  // x^8: one byte
    for (; bytes != 0; bytes >>= 1) {
      if (bytes & 1) result = multiply(result, power);
      power = multiply(power, power);
    }
    return result;
  }
};

CrcField field_of(ChecksumAlgorithm a) {
  switch (a) {
    case ChecksumAlgorithm::kCrc32: return {0xEDB88320u, 32};
    case ChecksumAlgorithm::kCrc32c: return {0x82F63B78u, 32};
    default: return {kCrc64NvmePoly, 64};
  }
}

uint64_t from_big_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  return v;
}

}  // namespace

std::string combine_crc(ChecksumAlgorithm a, std::string_view first, std::string_view second,
                        uint64_t second_length) {
  APUS_CHECK(is_crc(a) && first.size() == checksum_size(a) && second.size() == first.size());
  const CrcField f = field_of(a);
  // The pre- and post-inversions of these CRCs cancel out here, as in zlib's crc32_combine.
  const uint64_t combined =
      f.multiply(f.x_to_bytes(second_length), from_big_endian(first)) ^ from_big_endian(second);
  return big_endian(combined, checksum_size(a));
}

std::optional<std::string> decode_checksum(std::string_view value, size_t size) {
  // S3 wants the padded form: a whole number of quanta, nothing before the data.
  if (value.empty() || value.size() % 4 != 0 || value.front() == '=') return std::nullopt;
  auto raw = common::crypto::strict_b64decode(value);
  if (!raw || raw->size() != size) return std::nullopt;
  return raw;
}

std::string checksum_upper_name(ChecksumAlgorithm a) {
  std::string name(checksum_name(a));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string checksum_sysmeta(ChecksumAlgorithm a) {
  std::string name(checksum_name(a));
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return "X-Object-Sysmeta-S3api-Checksum-" + name;
}

}  // namespace apus::proxy::s3api
