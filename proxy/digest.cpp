// Signature primitives (digest.h).
#include "proxy/digest.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/assert.h"
#include "common/config/config.h"
#include "common/crypto/base64.h"
#include "common/crypto/md5.h"

namespace apus::proxy::digest {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}


std::string to_hex(std::string_view bytes) {
  std::string out(bytes.size() * 2, '\0');
  common::crypto::write_hex(
      {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, out.data());
  return out;
}

}  // namespace

std::string temp_url_hmac(std::string_view name, std::string_view method,
                          std::string_view expires, std::string_view path, std::string_view key,
                          std::string_view ip_range) {
  std::string body;
  if (!ip_range.empty()) {
    body.append("ip=").append(ip_range).push_back('\n');
  }
  body.append(method).push_back('\n');
  body.append(expires).push_back('\n');
  body.append(path);
  return hmac_hex(name, key, body);
}

std::optional<std::string> strict_b64decode_padded(std::string_view value) {
  // strict_b64decode: apart from '=' at either end, only the standard alphabet.
  size_t b = value.find_first_not_of('=');
  std::string_view inner = b == std::string_view::npos
                               ? std::string_view()
                               : value.substr(b, value.find_last_not_of('=') - b + 1);
  for (char c : inner) {
    if (common::crypto::b64_value(c) < 0) return std::nullopt;
  }
  // b64decode(value + "=="): '=' before any data is skipped, and the padding after the data
  // ends it; only the data characters count.
  std::string out;
  uint32_t acc = 0;
  int quad = 0;
  for (char c : inner) {
    acc = (acc << 6) | static_cast<uint32_t>(common::crypto::b64_value(c));
    if (++quad == 4) {
      out.push_back(static_cast<char>((acc >> 16) & 0xff));
      out.push_back(static_cast<char>((acc >> 8) & 0xff));
      out.push_back(static_cast<char>(acc & 0xff));
      acc = 0;
      quad = 0;
    }
  }
  if (quad == 1) return std::nullopt;  // 4n+1 data characters
  if (quad == 2) out.push_back(static_cast<char>((acc >> 4) & 0xff));
  if (quad == 3) {
    out.push_back(static_cast<char>((acc >> 10) & 0xff));
    out.push_back(static_cast<char>((acc >> 2) & 0xff));
  }
  return out;
}

std::optional<Signature> extract_digest_and_algorithm(std::string_view value) {
  Signature sig;
  if (size_t colon = value.find(':'); colon != std::string_view::npos) {
    sig.algorithm = std::string(value.substr(0, colon));
    std::string data(value.substr(colon + 1));
    const bool url_safe = data.find_first_of("-_") != std::string::npos;
    const bool standard = data.find_first_of("+/") != std::string::npos;
    if (url_safe && !standard) {
      std::replace(data.begin(), data.end(), '-', '+');
      std::replace(data.begin(), data.end(), '_', '/');
    }
    auto bytes = strict_b64decode_padded(data);
    if (!bytes) return std::nullopt;
    sig.hex = to_hex(*bytes);
    return sig;
  }
  if (value.size() % 2 != 0) return std::nullopt;
  for (char c : value) {
    if (hex_value(c) < 0) return std::nullopt;
  }
  switch (value.size()) {
    case 40: sig.algorithm = "sha1"; break;
    case 64: sig.algorithm = "sha256"; break;
    case 128: sig.algorithm = "sha512"; break;
    default: return std::nullopt;
  }
  sig.hex = std::string(value);
  return sig;
}

bool AllowedDigests::contains(std::string_view name) const {
  return std::find(allowed.begin(), allowed.end(), name) != allowed.end();
}

common::Result<AllowedDigests> allowed_digests(std::string_view option,
                                               std::vector<std::string>* ignored) {
  std::set<std::string> wanted;
  for (std::string w : common::split_words(option)) {
    std::transform(w.begin(), w.end(), w.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    wanted.insert(std::move(w));
  }
  if (wanted.empty()) wanted.insert(std::begin(kSupported), std::end(kSupported));
  AllowedDigests out;
  for (const std::string& w : wanted) {  // a std::set iterates sorted
    if (std::find(std::begin(kSupported), std::end(kSupported), w) == std::end(kSupported)) {
      if (ignored) ignored->push_back(w);
      continue;
    }
    out.allowed.push_back(w);
    if (std::find(std::begin(kDeprecated), std::end(kDeprecated), w) != std::end(kDeprecated)) {
      out.deprecated.push_back(w);
    }
  }
  if (out.allowed.empty()) {
    return common::Status::invalid_argument("No valid digest algorithms are configured");
  }
  return out;
}

}  // namespace apus::proxy::digest
