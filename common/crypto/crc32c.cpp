#include "common/crypto/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstdio>

namespace apus::common::crypto {

void Crc32c::update(std::string_view data) {
  // ISA-L's length is an int: feed a huge buffer in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  while (!data.empty()) {
    size_t n = std::min(data.size(), kPiece);
    auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
    state_ = crc32_iscsi(p, static_cast<int>(n), state_);
    data.remove_prefix(n);
  }
}

std::string Crc32c::hex() const {
  char out[9];
  std::snprintf(out, sizeof out, "%08x", value());
  return std::string(out, 8);
}

std::string crc32c_hex(std::string_view data) {
  Crc32c crc;
  crc.update(data);
  return crc.hex();
}

std::optional<uint32_t> parse_crc32c_hex(std::string_view hex) {
  if (hex.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : hex) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return std::nullopt;
    v = (v << 4) | static_cast<uint32_t>(digit);
  }
  return v;
}

}  // namespace apus::common::crypto
