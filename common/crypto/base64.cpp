#include "common/crypto/base64.h"

#include <cstdint>

namespace apus::common::crypto {

namespace {
constexpr std::string_view kB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> strict_b64decode(std::string_view text) {
  // Leading and trailing '=' are padding to Python; everything between must be the alphabet.
  size_t lead = 0;
  while (lead < text.size() && text[lead] == '=') ++lead;
  size_t end = text.size();
  while (end > lead && text[end - 1] == '=') --end;
  std::string_view data = text.substr(lead, end - lead);
  size_t pads = text.size() - end;
  for (char c : data) {
    if (b64_value(c) < 0) return std::nullopt;
  }
  // binascii: a lone char past whole quanta is an error; two need "==", three need "=".
  size_t rest = data.size() % 4;
  if (rest == 1 || (rest == 2 && pads < 2) || (rest == 3 && pads < 1)) return std::nullopt;
  std::string out;
  out.reserve(data.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : data) {
    acc = (acc << 6) | static_cast<uint32_t>(b64_value(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::string b64encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kB64[(n >> s) & 63]);
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    if (rest == 2) n |= uint8_t(bytes[i + 1]) << 8;
    out.push_back(kB64[(n >> 18) & 63]);
    out.push_back(kB64[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kB64[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace apus::common::crypto
