// The checksums S3 clients send with uploads (x-amz-checksum-crc32, -crc32c, -crc64nvme,
// -sha1, -sha256; AWS SDKs send CRC32 or CRC64NVME by default since 2025), computed
// incrementally as a body streams. CRC32 and CRC32C use ISA-L (Debian's libisal: PCLMUL and
// SSE4.2 instructions), CRC64NVME a slicing-by-8 table, SHA-1 and SHA-256 OpenSSL. Digests
// are the big-endian bytes S3 sends base64-encoded.
//
// Thread-compatible: a Checksum belongs to one body.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/crypto/crc32c.h"

namespace apus::proxy::s3api {

enum class ChecksumAlgorithm { kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256 };

// The algorithm of a header or trailer name ("x-amz-checksum-crc32", any case), or nullopt.
std::optional<ChecksumAlgorithm> checksum_algorithm_of(std::string_view header);
inline constexpr ChecksumAlgorithm kChecksumAlgorithms[] = {
    ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c, ChecksumAlgorithm::kCrc64Nvme,
    ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256};

// "crc32", "crc32c", "crc64nvme", "sha1", "sha256" (as x-amz-sdk-checksum-algorithm names
// them, lower-cased).
std::string_view checksum_name(ChecksumAlgorithm a);
// "CRC32", "CRC32C", ...: as S3 writes them in x-amz-checksum-algorithm, messages and XML
// element names (ChecksumCRC32).
std::string checksum_upper_name(ChecksumAlgorithm a);
// The digest's size in bytes (4, 4, 8, 20, 32).
size_t checksum_size(ChecksumAlgorithm a);

class Checksum {
 public:
  explicit Checksum(ChecksumAlgorithm algorithm);
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;

  ChecksumAlgorithm algorithm() const { return algorithm_; }
  void update(std::string_view data);
  // The digest of everything fed so far (raw bytes, big-endian for the CRCs).
  std::string digest() const;

 private:
  ChecksumAlgorithm algorithm_;
  uint64_t crc_ = 0;                 // CRC32 / CRC64-NVME
  common::crypto::Crc32c crc32c_;  // the one Apus checks its own bodies with
  struct Hash;
  std::unique_ptr<Hash> hash_;  // SHA-1 / SHA-256
};

// Whether `a` is a CRC, whose checksums of pieces combine into the whole's (FULL_OBJECT
// checksums of multipart uploads).
bool is_crc(ChecksumAlgorithm a);

// The CRC digest of A followed by B from the digests of A and of B (`second_length` bytes), as
// zlib's crc32_combine() does it: multiplying A's CRC by x^(8 * length of B) modulo the
// polynomial. REQUIRES: is_crc(a), and digests of checksum_size(a) bytes.
std::string combine_crc(ChecksumAlgorithm a, std::string_view first, std::string_view second,
                        uint64_t second_length);

// Where an object keeps the checksum it was uploaded with (Apus's own sysmeta; Swift's s3api
// stores none): "X-Object-Sysmeta-S3api-Checksum-Crc32" and so on, the value as S3 sends it
// (base64, "-<parts>" after a multipart upload's composite one), and its type
// (FULL_OBJECT or COMPOSITE) in X-Object-Sysmeta-S3api-Checksum-Type.
std::string checksum_sysmeta(ChecksumAlgorithm a);
inline constexpr std::string_view kChecksumTypeSysmeta = "X-Object-Sysmeta-S3api-Checksum-Type";

// Swift's strict_b64decode(value, exact_size): standard base64, padded, decoding to exactly
// `size` bytes; nullopt otherwise.
std::optional<std::string> decode_checksum(std::string_view value, size_t size);

}  // namespace apus::proxy::s3api
