// The signature primitives tempurl and formpost share, as Swift's swift/common/digest.py
// defines them: HMAC-SHA1/SHA256/SHA512 (OpenSSL), the two spellings of a client's signature
// (hex, whose length names the digest, or "<digest>:<base64>"), the allowed_digests option,
// and a comparison whose time does not depend on where two signatures differ.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/crypto/hmac.h"
#include "common/status.h"

namespace apus::proxy::digest {

// The digests Swift supports for signatures; sha1 is deprecated (still allowed by default).
inline constexpr std::string_view kSupported[] = {"sha1", "sha256", "sha512"};
inline constexpr std::string_view kDeprecated[] = {"sha1"};

// HMAC and the constant-time comparison live in common (container sync signs with them too).
using common::crypto::hmac_hex;
using common::crypto::streq_const_time;

// Swift's get_hmac(): the hex HMAC of "<method>\n<expires>\n<path>", with "ip=<ip_range>\n" in
// front when `ip_range` is not empty. `expires` is the decimal text Python's str() gives.
std::string temp_url_hmac(std::string_view name, std::string_view method,
                          std::string_view expires, std::string_view path, std::string_view key,
                          std::string_view ip_range = {});

// A client's signature read as Swift's extract_digest_and_algorithm() reads it.
struct Signature {
  std::string algorithm;  // any name after "<name>:"; for hex: sha1, sha256 or sha512
  std::string hex;        // hex as the client sent it (case kept), or the base64 decoded to hex
};
// "<hex>" (40, 64 or 128 hex digits) or "<name>:<base64>" (standard or URL-safe alphabet,
// padding optional). nullopt where Swift raises ValueError (bad hex, hex of another length, a
// character outside the alphabet, a data length of 4n+1).
std::optional<Signature> extract_digest_and_algorithm(std::string_view value);

// The allowed_digests option as Swift's get_allowed_digests() reads it (whitespace separated,
// case-insensitive; empty: every supported digest): the supported ones, sorted, and those of
// them that are deprecated. InvalidArgument "No valid digest algorithms are configured" when
// none is left; `ignored` gets the configured names Swift warns about as unsupported.
struct AllowedDigests {
  std::vector<std::string> allowed;     // sorted
  std::vector<std::string> deprecated;  // sorted
  bool contains(std::string_view name) const;
};
common::Result<AllowedDigests> allowed_digests(std::string_view option,
                                               std::vector<std::string>* ignored = nullptr);

// Python's base64.b64decode(value + "==") after Swift's strict_b64decode() check: nullopt for a
// character outside the standard alphabet (leading and trailing '=' aside) or 4n+1 data
// characters. Exposed for tests.
std::optional<std::string> strict_b64decode_padded(std::string_view value);

}  // namespace apus::proxy::digest
