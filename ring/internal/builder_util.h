// Helpers shared by the builder, its file format and its command line (ring/ only).
//
// PyRandom reproduces the numbers Python's `random` module draws (Mersenne Twister MT19937
// with Python's seeding, getrandbits, randbelow, randint and shuffle), so a rebalance seeded
// like swift-ring-builder's makes the same choices. The formatting helpers print values the way
// Python's str() and repr() do, which swift-ring-builder's output relies on.
//
// Thread-compatible: a PyRandom is a value; the functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace apus::common::io {
class Fs;
}

namespace apus::ring::internal {

class PyRandom {
 public:
  // random.seed(n) for a non-negative integer n.
  explicit PyRandom(uint64_t seed = 0) { seed_int(seed); }
  void seed_int(uint64_t n);
  // random.seed(s) for a str s (version 2: s's UTF-8 bytes followed by their SHA-512 digest,
  // read as one big-endian integer).
  void seed_str(std::string_view s);

  // The next 32-bit output of the generator.
  uint32_t genrand();
  // random.getrandbits(k), 1 <= k <= 64.
  uint64_t getrandbits(int k);
  // random._randbelow(n), n >= 1: uniform in [0, n).
  uint64_t randbelow(uint64_t n);
  // random.randint(a, b), a <= b.
  int64_t randint(int64_t a, int64_t b) {
    return a + static_cast<int64_t>(randbelow(static_cast<uint64_t>(b - a) + 1));
  }
  // random.shuffle(v).
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i-- > 1;) {
      std::size_t j = static_cast<std::size_t>(randbelow(i + 1));
      std::swap(v[i], v[j]);
    }
  }

 private:
  static constexpr int kN = 624;
  // Python's init_by_array with the 32-bit words of the seed integer, least significant first.
  void init_by_array(const std::vector<uint32_t>& key);
  void init_genrand(uint32_t s);

  std::array<uint32_t, kN> mt_{};
  int mti_ = kN + 1;
};

// Python's repr()/str() of a float: "100.0", "0.5", "1e-05", "1e+16".
std::string py_float_repr(double v);

// Swift's validate_and_normalize_ip: an IPv4 address lowercased as given, an IPv6 address in
// its canonical (inet_ntop) form; nullopt when neither.
std::optional<std::string> normalize_ip(std::string_view ip);
// Swift's validate_and_normalize_address: like normalize_ip but also accepting host names
// (lowercased) and "[v6]" brackets; nullopt when invalid.
std::optional<std::string> normalize_address(std::string_view address);
bool is_valid_ipv6(std::string_view ip);

// Replaces path with data atomically and durably, mode 0644: a temp file in path's directory,
// write, fsync, fchmod, rename, directory fsync. On a failure before the rename, path is left
// as it was and the temp file is removed. (builder_format.cpp)
common::Status write_file_0644(common::io::Fs& fs, const std::string& path, std::string_view data);

// printf into a std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace apus::ring::internal
