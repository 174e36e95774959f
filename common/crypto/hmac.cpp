#include "common/crypto/hmac.h"

#include <utility>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/assert.h"
#include "common/crypto/md5.h"

namespace apus::common::crypto {

namespace {

const EVP_MD* md_named(std::string_view name) {
  if (name == "sha1") return EVP_sha1();
  if (name == "sha256") return EVP_sha256();
  if (name == "sha512") return EVP_sha512();
  return nullptr;
}

}  // namespace

std::string hmac_hex(std::string_view name, std::string_view key, std::string_view message) {
  std::string raw = hmac_bytes(name, key, message);
  std::string hex(raw.size() * 2, '\0');
  write_hex({reinterpret_cast<const uint8_t*>(raw.data()), raw.size()}, hex.data());
  return hex;
}

std::string sha256_hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  APUS_CHECK(EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr) == 1);
  std::string hex(size_t{len} * 2, '\0');
  write_hex({out, len}, hex.data());
  return hex;
}

std::optional<std::string> digest_hex(std::string_view name, std::string_view data) {
  static constexpr std::pair<std::string_view, const char*> kNames[] = {
      {"md5", "MD5"},           {"sha1", "SHA1"},         {"sha224", "SHA224"},
      {"sha256", "SHA256"},     {"sha384", "SHA384"},     {"sha512", "SHA512"},
      {"sha3_224", "SHA3-224"}, {"sha3_256", "SHA3-256"}, {"sha3_384", "SHA3-384"},
      {"sha3_512", "SHA3-512"}, {"blake2b", "BLAKE2B-512"}, {"blake2s", "BLAKE2S-256"}};
  for (auto [python, openssl] : kNames) {
    if (python != name) continue;
    const EVP_MD* md = EVP_get_digestbyname(openssl);
    if (!md) return std::nullopt;
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    APUS_CHECK(EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) == 1);
    std::string hex(size_t{len} * 2, '\0');
    write_hex({out, len}, hex.data());
    return hex;
  }
  return std::nullopt;
}

std::string hmac_bytes(std::string_view name, std::string_view key, std::string_view message) {
  const EVP_MD* md = md_named(name);
  APUS_CHECK(md != nullptr);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // An empty key is legal for HMAC; OpenSSL wants a non-null pointer for it.
  static const unsigned char kNoKey = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kNoKey) : key.data();
  APUS_CHECK(HMAC(md, k, static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
                  &len) != nullptr);
  return std::string(reinterpret_cast<const char*>(out), len);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  APUS_CHECK(ctx_ != nullptr);
  reset();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(std::string_view data) {
  APUS_CHECK(EVP_DigestUpdate(ctx_, data.data(), data.size()) == 1);
}

std::string Sha256::hex_digest() const {
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  APUS_CHECK(copy != nullptr && EVP_MD_CTX_copy_ex(copy, ctx_) == 1);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  APUS_CHECK(EVP_DigestFinal_ex(copy, out, &len) == 1);
  EVP_MD_CTX_free(copy);
  std::string hex(size_t{len} * 2, '\0');
  write_hex({out, len}, hex.data());
  return hex;
}

void Sha256::reset() { APUS_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1); }

bool streq_const_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace apus::common::crypto
