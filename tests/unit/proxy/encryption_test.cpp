// Swift's stored encryption format (proxy/encryption.h), against values Swift 2.30.1 computes
// for the same inputs (its crypto_utils.dump_crypto_meta, Crypto's AES-CTR, the encrypter's
// _hmac_etag and the keymaster's HMAC): a proxy of either kind must read what the other stored.
#include "proxy/encryption.h"

#include <doctest/doctest.h>

#include <string>

#include "common/crypto/base64.h"

namespace {

using apus::proxy::encryption::check_crypto_meta;
using apus::proxy::encryption::CryptoMeta;
using apus::proxy::encryption::decrypt_value;
using apus::proxy::encryption::derive_key;
using apus::proxy::encryption::dump_crypto_meta;
using apus::proxy::encryption::encrypt_value;
using apus::proxy::encryption::extract_crypto_meta;
using apus::proxy::encryption::hmac_etag;
using apus::proxy::encryption::load_crypto_meta;
using apus::proxy::encryption::WrappedKey;

// dump_crypto_meta({'iv': b'0123456789abcdef', 'cipher': 'AES_CTR_256', 'body_key': {'key':
// b'k' * 32, 'iv': b'i' * 16}, 'key_id': {'v': '2', 'path': '/a/c/\xc3\xa9'}}) in Swift: the
// path as meta version 2 writes it, a WSGI string.
constexpr std::string_view kSwiftDump =
    "%7B%22body_key%22%3A+%7B%22iv%22%3A+%22aWlpaWlpaWlpaWlpaWlpaQ%3D%3D%22%2C+%22key%22%3A+%22"
    "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s%3D%22%7D%2C+%22cipher%22%3A+%22AES_CTR_256%22%2C"
    "+%22iv%22%3A+%22MDEyMzQ1Njc4OWFiY2RlZg%3D%3D%22%2C+%22key_id%22%3A+%7B%22path%22%3A+%22%2Fa"
    "%2Fc%2F%5Cu00c3%5Cu00a9%22%2C+%22v%22%3A+%222%22%7D%7D";

CryptoMeta swift_meta() {
  CryptoMeta meta;
  meta.iv = "0123456789abcdef";
  meta.body_key = WrappedKey{std::string(32, 'k'), std::string(16, 'i')};
  meta.key_id = "{\"v\": \"2\", \"path\": \"/a/c/\xc3\x83\xc2\xa9\"}";
  return meta;
}

TEST_CASE("encryption: crypto meta is dumped as Swift dumps it, and read back") {
  CHECK(dump_crypto_meta(swift_meta()) == kSwiftDump);
  auto loaded = load_crypto_meta(kSwiftDump);
  REQUIRE(loaded.ok());
  CHECK(loaded->cipher == "AES_CTR_256");
  CHECK(loaded->iv == "0123456789abcdef");
  REQUIRE(loaded->body_key);
  CHECK(loaded->body_key->key == std::string(32, 'k'));
  CHECK(loaded->body_key->iv == std::string(16, 'i'));
  CHECK(check_crypto_meta(*loaded).ok());
  CHECK(dump_crypto_meta(*loaded) == kSwiftDump);
}

TEST_CASE("encryption: bad crypto meta is refused, not guessed at") {
  CHECK(!load_crypto_meta("not json").ok());
  CHECK(!load_crypto_meta("%5B%5D").ok());  // a list
  CHECK(!load_crypto_meta("%7B%22iv%22%3A+%22%21%21%22%7D").ok());  // iv not base64
  CHECK(!load_crypto_meta("%7B%22body_key%22%3A+1%7D").ok());
  CryptoMeta short_iv;
  short_iv.iv = "short";
  CHECK(!check_crypto_meta(short_iv).ok());
  CryptoMeta other_cipher = swift_meta();
  other_cipher.cipher = "AES_CBC_256";
  CHECK(!check_crypto_meta(other_cipher).ok());
}

TEST_CASE("encryption: values, ETag MACs and keys as Swift computes them") {
  const std::string key(32, 'K');
  // Swift: base64(AES-CTR(K * 32, iv "0123456789abcdef", "hello world")).
  std::string value = "MastIdUSMgtwo1w=; swift_meta=" + dump_crypto_meta([] {
    CryptoMeta m;
    m.iv = "0123456789abcdef";
    return m;
  }());
  auto plain = decrypt_value(key, value, true);
  REQUIRE(plain.ok());
  CHECK(*plain == "hello world");
  CHECK(hmac_etag(key, "d41d8cd98f00b204e9800998ecf8427e") ==
        "+JnGUyzELcbb1dg0h+ZQfSoy/oshyAnNnEShEKASA/o=");
  CHECK(apus::common::crypto::b64encode(derive_key(std::string(32, 'S'), "/a/c/\xc3\xa9")) ==
        "S4AI4BO85i07tlwAtY3o9mlIpZKV1Tkpuvlr62A5DIg=");
}

TEST_CASE("encryption: encrypt_value round-trips with a new IV each time") {
  const std::string key(32, 'x');
  std::string a = encrypt_value(key, "some etag", "{\"v\": \"2\", \"path\": \"/a/c\"}");
  std::string b = encrypt_value(key, "some etag");
  CHECK(a != b);
  CHECK(*decrypt_value(key, a, true) == "some etag");
  CHECK(*decrypt_value(key, b, true) == "some etag");
  auto extracted = extract_crypto_meta(a);
  REQUIRE(extracted.ok());
  REQUIRE(extracted->meta);
  CHECK(extracted->meta->key_id == "{\"path\": \"/a/c\", \"v\": \"2\"}");
  // A value without meta is plaintext, unless it must be encrypted.
  CHECK(*decrypt_value(key, "d41d8cd98f00b204e9800998ecf8427e", false) ==
        "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(!decrypt_value(key, "plain", true).ok());
  // An SLO's listing ETag has parameters of its own before swift_meta.
  auto params = extract_crypto_meta("abc; s3_etag=def");
  REQUIRE(params.ok());
  CHECK(params->value == "abc");
  CHECK(!params->meta);
  CHECK(!decrypt_value(key, "abc; swift_meta=%7B", false).ok());
}

}  // namespace
