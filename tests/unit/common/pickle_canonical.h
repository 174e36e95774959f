// The canonical text form of a pickle value that tests/interop/swift_vectors.py (canon())
// also computes, so C++ and Python results compare as strings:
//   N T F i<int> f<16 hex digits of the IEEE double> s<hex of the UTF-8> b<hex> [a,b] (a,b)
//   {k:v,k:v}
// Also the "khex:vhex,..." form of (key, value) byte pairs. Used by the pickle unit test and
// the pickle_roundtrip interop tool.
//
// Thread-safe: pure functions.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/pickle.h"

namespace apus::testing {

inline std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out += kDigits[static_cast<unsigned char>(c) >> 4];
    out += kDigits[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

// nullopt unless `text` is lowercase or uppercase hex of whole bytes.
inline std::optional<std::string> from_hex(std::string_view text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

inline void canonical_to(std::string& out, const common::pickle::Value& v) {
  using Kind = common::pickle::Value::Kind;
  switch (v.kind()) {
    case Kind::kNone:
      out += 'N';
      return;
    case Kind::kBool:
      out += v.as_bool() ? 'T' : 'F';
      return;
    case Kind::kInt:
      out += 'i' + std::to_string(v.as_int());
      return;
    case Kind::kFloat: {
      const auto bits = std::bit_cast<uint64_t>(v.as_float());
      std::string be;
      for (int i = 7; i >= 0; --i) be += static_cast<char>(bits >> (8 * i) & 0xFF);
      out += 'f' + hex(be);
      return;
    }
    case Kind::kStr:
      out += 's' + hex(v.as_str());
      return;
    case Kind::kBytes:
      out += 'b' + hex(v.as_bytes());
      return;
    case Kind::kList:
    case Kind::kTuple: {
      out += v.is_list() ? '[' : '(';
      bool first = true;
      for (const auto& item : v.as_list()) {
        if (!first) out += ',';
        first = false;
        canonical_to(out, item);
      }
      out += v.is_list() ? ']' : ')';
      return;
    }
    case Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.as_dict()) {
        if (!first) out += ',';
        first = false;
        canonical_to(out, k);
        out += ':';
        canonical_to(out, val);
      }
      out += '}';
      return;
    }
  }
}

inline std::string canonical(const common::pickle::Value& v) {
  std::string out;
  canonical_to(out, v);
  return out;
}

using BytePairs = std::vector<std::pair<std::string, std::string>>;

inline std::string pairs_to_hex(const BytePairs& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) {
    if (!out.empty()) out += ',';
    out += hex(k) + ':' + hex(v);
  }
  return out;
}

inline std::optional<BytePairs> pairs_from_hex(std::string_view text) {
  BytePairs out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto k = from_hex(item.substr(0, colon));
    auto v = from_hex(item.substr(colon + 1));
    if (!k || !v) return std::nullopt;
    out.emplace_back(std::move(*k), std::move(*v));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace apus::testing
