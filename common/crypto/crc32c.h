// CRC32C (Castagnoli), as iSCSI and S3's x-amz-checksum-crc32c define it, computed by ISA-L
// with the CPU's CRC instructions (several GB/s per core against MD5's ~0.9).
//
// Apus uses it where MD5 would cost a second pass over a body whose MD5 is already known: a
// PUT body travelling from an Apus proxy to an Apus object server carries the proxy's MD5 and
// CRC32C in its footer, and the object server checks the CRC32C instead of hashing again; the
// CRC32C stored with the object lets a whole-object GET check the bytes at memory speed.
//
// Thread-safety: Crc32c is thread-compatible; crc32c_hex() is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace apus::common::crypto {

// Incremental CRC32C: update() with consecutive pieces gives the CRC32C of their concatenation.
class Crc32c {
 public:
  void update(std::string_view data);
  uint32_t value() const { return ~state_; }
  // value() as 8 lowercase hex characters, most significant first.
  std::string hex() const;

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

std::string crc32c_hex(std::string_view data);
// The value of an 8-hex-digit CRC (either case); nullopt for anything else.
std::optional<uint32_t> parse_crc32c_hex(std::string_view hex);

}  // namespace apus::common::crypto
