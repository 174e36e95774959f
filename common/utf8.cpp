#include "common/utf8.h"

#include <cstdint>

namespace apus::common {

int utf8_sequence(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return -1;
  }
  size_t j = 1;
  for (; j <= need && i + j < s.size(); ++j) {
    const auto d = static_cast<unsigned char>(s[i + j]);
    if (d < (j == 1 ? lo : 0x80) || d > (j == 1 ? hi : 0xbf)) break;
  }
  return j == need + 1 ? static_cast<int>(need + 1) : -static_cast<int>(j);
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_sequence(s, i);
    if (n < 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::string utf8_replace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_sequence(s, i);
    if (n > 0) {
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out.append("\xef\xbf\xbd");
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

std::string increment_last_char(std::string_view s) {
  // Find the start of the last UTF-8 sequence and decode it.
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i])); };
  uint32_t cp = b(start);
  size_t len = s.size() - start;
  if (len == 2) cp = (cp & 0x1F) << 6 | (b(start + 1) & 0x3F);
  if (len == 3) cp = (cp & 0x0F) << 12 | (b(start + 1) & 0x3F) << 6 | (b(start + 2) & 0x3F);
  if (len == 4) {
    cp = (cp & 0x07) << 18 | (b(start + 1) & 0x3F) << 12 | (b(start + 2) & 0x3F) << 6 |
         (b(start + 3) & 0x3F);
  }
  ++cp;
  std::string out(s.substr(0, start));
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | cp >> 6));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | cp >> 12));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | cp >> 18));
    out.push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

}  // namespace apus::common
