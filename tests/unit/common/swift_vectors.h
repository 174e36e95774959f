// Access to the reference values stock Swift computed for these unit tests.
//
// CTest runs tests/interop/swift_vectors.py first (fixture `swift_vectors`), which writes
// $APUS_BINARY_DIR/swift_vectors.txt: one tab-separated vector per line, the first field naming
// its kind (the script's docstring lists them). The file is a declared fixture, so a missing
// variable or file fails the calling test instead of skipping it.
//
// Thread-compatible: tests call it from doctest's single thread.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

namespace apus::testing {

using VectorFields = std::vector<std::string>;  // fields after the kind

// All vectors of `kind` in file order. FAILs (and returns nothing) if the file is unavailable.
inline const std::vector<VectorFields>& swift_vectors(const std::string& kind) {
  static const std::map<std::string, std::vector<VectorFields>>* const by_kind = [] {
    auto* m = new std::map<std::string, std::vector<VectorFields>>();
    const char* dir = std::getenv("APUS_BINARY_DIR");
    if (dir == nullptr) return m;
    std::ifstream in(std::string(dir) + "/swift_vectors.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      VectorFields fields;
      size_t start = 0;
      for (;;) {
        const size_t tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab - start));
        if (tab == std::string::npos) break;
        start = tab + 1;
      }
      std::string k = fields.front();
      fields.erase(fields.begin());
      (*m)[k].push_back(std::move(fields));
    }
    return m;
  }();
  REQUIRE_MESSAGE(std::getenv("APUS_BINARY_DIR") != nullptr,
                  "APUS_BINARY_DIR is not set: run through ctest (fixture swift_vectors)");
  REQUIRE_MESSAGE(!by_kind->empty(),
                  "no vectors in $APUS_BINARY_DIR/swift_vectors.txt: run "
                  "tests/interop/swift_vectors.py (ctest fixture) first");
  static const std::vector<VectorFields> kNone;
  const auto it = by_kind->find(kind);
  REQUIRE_MESSAGE(it != by_kind->end(), "no vectors of kind " << kind);
  return it == by_kind->end() ? kNone : it->second;
}

// Decodes the script's hex fields; "-" (absent) decodes to "".
inline std::string unhex(std::string_view hex) {
  std::string out;
  if (hex == "-") return out;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  bool valid = hex.size() % 2 == 0;
  for (size_t i = 0; valid && i + 1 < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    valid = hi >= 0 && lo >= 0;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  REQUIRE_MESSAGE(valid, "bad hex field: " << hex);
  return out;
}

}  // namespace apus::testing
