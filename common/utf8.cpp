#include "common/utf8.h"

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

}  // namespace apus::common
