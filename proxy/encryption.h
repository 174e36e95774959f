// Encryption at rest, as Swift's keymaster and encryption middlewares do it and in their stored
// format, so that Swift's and Apus's proxies with the same root secrets read each other's
// objects:
//   - keymaster derives a key per path from root secrets: HMAC-SHA256(secret, "/a/c") for the
//     container, HMAC-SHA256(secret, "/a/c/o") for the object.
//   - encryption encrypts an object's body with a random key (AES-256-CTR), stores that key
//     wrapped with the object key, and encrypts the user metadata, the ETag and the ETag the
//     container listing shows; it decrypts all of them on the way out (ranges too), and the
//     `hash` of JSON container listings.
// What is stored where ("crypto meta" is JSON, URL-quoted, with base64 keys and IVs):
//   X-Object-Sysmeta-Crypto-Body-Meta     the body's IV, wrapped key and key id
//   X-Object-Sysmeta-Crypto-Etag          "<base64 encrypted ETag>; swift_meta=<crypto meta>"
//   X-Object-Sysmeta-Crypto-Etag-Mac      base64 HMAC-SHA256(object key, plaintext ETag), which
//                                         the object server compares with conditional requests
//   X-Object-Transient-Sysmeta-Crypto-Meta-<name>   each X-Object-Meta-<name>, encrypted
//   X-Object-Transient-Sysmeta-Crypto-Meta          the metadata's cipher and key id
//   X-Object-Sysmeta-Container-Update-Override-Etag the listing's ETag, encrypted with the
//                                         container key
// The helpers below are that format, for the middlewares and their tests.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/config.h"
#include "common/status.h"
#include "proxy/pipeline.h"

namespace apus::proxy {

common::Result<std::unique_ptr<Middleware>> make_keymaster(const common::Section& section,
                                                           const MiddlewareContext& context);
common::Result<std::unique_ptr<Middleware>> make_encryption(const common::Section& section,
                                                            const MiddlewareContext& context);

namespace encryption {

inline constexpr std::string_view kCipher = "AES_CTR_256";

struct WrappedKey {
  std::string key;  // raw bytes
  std::string iv;   // raw bytes
};

// Swift's crypto meta dict.
struct CryptoMeta {
  std::string cipher = std::string(kCipher);
  std::string iv;                      // raw bytes; empty: none
  std::optional<WrappedKey> body_key;  // the body's key, wrapped with the object key
  std::string key_id;                  // JSON object text; empty: none
};

// Swift's dump_crypto_meta(): quote_plus(json.dumps(meta, sort_keys=True)), keys and IVs in
// base64.
std::string dump_crypto_meta(const CryptoMeta& meta);
// Swift's load_crypto_meta(); InvalidArgument when `value` is not such a dump.
common::Result<CryptoMeta> load_crypto_meta(std::string_view value);
// Swift's check_crypto_meta(): the cipher is AES_CTR_256 and the IV 16 bytes.
common::Status check_crypto_meta(const CryptoMeta& meta);

// A value and the crypto meta appended to it ("<value>; swift_meta=<dump>"), if any.
struct ValueWithMeta {
  std::string value;
  std::optional<CryptoMeta> meta;
};
common::Result<ValueWithMeta> extract_crypto_meta(std::string_view value);

// Swift's encrypt_header_val() and append_crypto_meta(): "<base64 ciphertext>; swift_meta=..."
// with a new IV; `key_id`, when not empty, goes into the meta too. REQUIRES: `value` is not
// empty and `key` is 32 bytes.
std::string encrypt_value(std::string_view key, std::string_view value,
                          std::string_view key_id = {});
// The plaintext of a value encrypt_value() made. A value without crypto meta comes back as it
// is, unless `required`. InvalidArgument for bad meta or base64.
common::Result<std::string> decrypt_value(std::string_view key, std::string_view value,
                                          bool required);

// Swift's _hmac_etag(): base64 HMAC-SHA256(key, etag), what X-Object-Sysmeta-Crypto-Etag-Mac
// holds and what conditional requests are compared with.
std::string hmac_etag(std::string_view key, std::string_view etag);

// The keymaster's key for a path: HMAC-SHA256(secret, path as UTF-8).
std::string derive_key(std::string_view secret, std::string_view path);

}  // namespace encryption
}  // namespace apus::proxy
