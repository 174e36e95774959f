// HMAC signatures and their comparison, as Swift's signed requests use them (tempurl, formpost,
// container sync's X-Container-Sync-Auth, S3): OpenSSL's HMAC with SHA-1, SHA-256 or SHA-512,
// SHA-256 itself (S3 signs payload hashes), and a comparison whose time does not depend on
// where two signatures differ.
//
// The free functions are pure and thread-safe; a Sha256 is thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header.

namespace apus::common::crypto {

// HMAC of `message` with `key` under digest `name` ("sha1", "sha256", "sha512") as lowercase
// hex. REQUIRES: `name` is one of those three.
std::string hmac_hex(std::string_view name, std::string_view key, std::string_view message);
// The same HMAC as raw bytes (S3's Version 4 key derivation chains these).
std::string hmac_bytes(std::string_view name, std::string_view key, std::string_view message);
// SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);
// The digest of `data` under Python hashlib's `name` (md5, sha1, sha224, sha256, sha384, sha512,
// sha3_224, sha3_256, sha3_384, sha3_512, blake2b, blake2s) as lowercase hex; nullopt for
// another name.
std::optional<std::string> digest_hex(std::string_view name, std::string_view data);

// Incremental SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view data);
  // The digest of everything fed so far as 64 lowercase hex characters; the state is kept.
  std::string hex_digest() const;
  // Forgets all input.
  void reset();

 private:
  evp_md_ctx_st* ctx_;  // owned
};

// Swift's streq_const_time(): equal lengths and equal bytes, compared in a time that depends
// only on the length.
bool streq_const_time(std::string_view a, std::string_view b);

}  // namespace apus::common::crypto
