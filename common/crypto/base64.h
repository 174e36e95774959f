// Base64 as Swift uses it: Python's base64.b64encode, and Swift's strict_b64decode() (the
// standard alphabet only; binascii's padding rules), for SLO data segments, S3's checksums,
// Content-MD5 and continuation tokens.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace apus::common::crypto {

// Standard base64 with '=' padding.
std::string b64encode(std::string_view bytes);

// Swift's strict_b64decode(): the bytes of standard base64 (padding optional past a whole
// quantum, extra '=' ignored), or nullopt for any other character or a bad length.
std::optional<std::string> strict_b64decode(std::string_view text);

// The value of one base64 character of the standard alphabet, or -1.
int b64_value(char c);

}  // namespace apus::common::crypto
