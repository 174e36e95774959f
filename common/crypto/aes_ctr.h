// AES-256 in counter mode, as Swift's encryption middleware uses it for object bodies, metadata
// values and wrapped keys (its cipher "AES_CTR_256"): OpenSSL's EVP cipher, 32-byte keys and
// 16-byte IVs. A stream can start at any byte offset of the message, so a ranged GET decrypts
// from where its range starts.
//
// Thread-compatible: one AesCtr per stream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX, kept out of this header.

namespace apus::common::crypto {

inline constexpr size_t kAesKeyBytes = 32;
inline constexpr size_t kAesIvBytes = 16;

class AesCtr {
 public:
  // A stream positioned at byte `offset` of the message that started with counter block `iv`
  // (the counter is the whole 128-bit block, incremented per block modulo 2^128, as Python's
  // cryptography and OpenSSL count). REQUIRES: key is 32 bytes and iv 16.
  AesCtr(std::string_view key, std::string_view iv, uint64_t offset = 0);
  ~AesCtr();
  AesCtr(const AesCtr&) = delete;
  AesCtr& operator=(const AesCtr&) = delete;

  // Encrypts or decrypts (the same in counter mode) the next `in.size()` bytes into `out`,
  // which may be `in.data()` itself.
  void apply(std::string_view in, char* out);
  std::string apply(std::string_view in);

 private:
  evp_cipher_ctx_st* ctx_;  // owned
};

// AES-256-CTR of `data` from the start of the message: apply() on a new stream.
std::string aes_ctr(std::string_view key, std::string_view iv, std::string_view data);

}  // namespace apus::common::crypto
