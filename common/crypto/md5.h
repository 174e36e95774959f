// MD5 digests, as Swift uses them: object ETags, hash_path() and metadata checksums.
//
// A thin wrapper over OpenSSL's EVP interface. The MD5 algorithm object is fetched from the
// default provider once per process; each Md5 owns one EVP_MD_CTX that it reuses across
// reset() calls, so hashing many small inputs costs no allocation after the first. MD5 is used
// for naming and integrity, never for security.
//
// Thread-safety: Md5 is thread-compatible (one instance per thread or external locking). The
// free functions are thread-safe; they use a per-thread context.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header.

namespace apus::common::crypto {

using Md5Digest = std::array<uint8_t, 16>;

// Incremental MD5. Feed bytes with update(); read the digest at any point with digest() or
// hex_digest() (both leave the state untouched, like Python's hashlib); reset() starts over.
class Md5 {
 public:
  // Aborts (APUS_CHECK) if OpenSSL cannot provide MD5: the process could not work at all.
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  Md5(Md5&& other) noexcept;
  Md5& operator=(Md5&& other) noexcept;

  // Appends bytes to the message. The data need only live for the duration of the call.
  void update(std::span<const uint8_t> data);
  void update(std::string_view data);

  // The digest of everything fed since construction or the last reset(); the state is kept.
  Md5Digest digest() const;
  // digest() as 32 lowercase hex characters.
  std::string hex_digest() const;
  // Forgets all input, keeping the context allocated.
  void reset();

 private:
  evp_md_ctx_st* ctx_;  // owned; never null except after a move
};

// MD5 of `data` as raw bytes / as 32 lowercase hex characters.
Md5Digest md5(std::string_view data);
std::string md5_hex(std::string_view data);

// 32 lowercase hex characters for a digest.
std::string to_hex(const Md5Digest& digest);
// Writes 2 * bytes.size() lowercase hex characters to `out`, which must have room for them.
void write_hex(std::span<const uint8_t> bytes, char* out);

}  // namespace apus::common::crypto
