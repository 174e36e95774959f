// Helpers shared by the ring format and lookup tests: a temp directory, hand-made ring file
// images (gzip with stored blocks, so any payload can be crafted without zlib), and small
// RingData factories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <doctest/doctest.h>
#include <stdlib.h>

#include "ring/ring_data.h"
#include "tests/support/temp_dir.h"

namespace apus::ring::testing {

using TempDir = apus::test::TempDir;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void spit(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

inline uint32_t crc32_of(std::string_view s) {
  uint32_t c = 0xffffffffu;
  for (const unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

inline void put_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// A gzip member holding `payload` in stored (uncompressed) deflate blocks.
inline std::string gzip_stored(std::string_view payload) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  size_t off = 0;
  do {
    const size_t n = std::min<size_t>(65535, payload.size() - off);
    const bool final = off + n == payload.size();
    out += static_cast<char>(final ? 1 : 0);
    out += static_cast<char>(n & 0xff);
    out += static_cast<char>((n >> 8) & 0xff);
    out += static_cast<char>(~n & 0xff);
    out += static_cast<char>((~n >> 8) & 0xff);
    out.append(payload.substr(off, n));
    off += n;
  } while (off < payload.size());
  put_le32(out, crc32_of(payload));
  put_le32(out, static_cast<uint32_t>(payload.size()));
  return out;
}

// The uncompressed content of a ring file: magic, version, JSON length, JSON, table bytes.
inline std::string ring_payload(std::string_view json, std::string_view table,
                                std::string_view magic = "R1NG", uint16_t version = 1) {
  std::string out(magic);
  out += static_cast<char>(version >> 8);
  out += static_cast<char>(version & 0xff);
  const auto len = static_cast<uint32_t>(json.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((len >> shift) & 0xff);
  out += json;
  out += table;
  return out;
}

// Table bytes for rows of device ids in the given byte order.
inline std::string table_bytes(const std::vector<std::vector<uint16_t>>& rows, bool big_endian) {
  std::string out;
  for (const auto& row : rows) {
    for (const uint16_t v : row) {
      const char hi = static_cast<char>(v >> 8), lo = static_cast<char>(v & 0xff);
      out += big_endian ? hi : lo;
      out += big_endian ? lo : hi;
    }
  }
  return out;
}

inline Device make_device(int id, int region, int zone, std::string ip, std::string dev,
                          double weight = 100.0) {
  Device d;
  d.id = id;
  d.region = region;
  d.zone = zone;
  d.ip = ip;
  d.port = 6200 + region;
  d.replication_ip = std::move(ip);
  d.replication_port = d.port;
  d.device = std::move(dev);
  d.weight = weight;
  return d;
}

// A random but well-formed ring: `ndevs` device slots spread over regions, zones and servers
// (some slots null, some devices never assigned), `replicas` rows (the fractional part as a
// short last row), ids drawn at random from the assignable devices.
inline RingData random_ring(uint32_t seed, int part_power, double replicas, int ndevs, int regions,
                            int zones_per_region, int servers_per_zone) {
  std::mt19937 rng(seed);
  RingData ring;
  ring.part_shift = 32 - part_power;
  std::vector<uint16_t> assignable;
  for (int id = 0; id < ndevs; ++id) {
    if (ndevs > 4 && rng() % 13 == 0) {
      ring.devs.emplace_back(std::nullopt);
      continue;
    }
    const int region = 1 + static_cast<int>(rng() % static_cast<uint32_t>(regions));
    const int zone = 1 + static_cast<int>(rng() % static_cast<uint32_t>(zones_per_region));
    const int server = static_cast<int>(rng() % static_cast<uint32_t>(servers_per_zone));
    ring.devs.emplace_back(make_device(
        id, region, zone,
        "10." + std::to_string(region) + "." + std::to_string(zone) + "." + std::to_string(server),
        "d" + std::to_string(id)));
    // A few devices hold nothing, so they must not count towards the handoff totals.
    if (ndevs <= 4 || rng() % 11 != 0) assignable.push_back(static_cast<uint16_t>(id));
  }
  REQUIRE(!assignable.empty());
  const uint64_t parts = uint64_t{1} << part_power;
  const int whole = static_cast<int>(replicas);
  const double frac = replicas - whole;
  for (int r = 0; r < whole; ++r) ring.replica2part2dev.emplace_back(parts);
  if (frac > 0) {
    ring.replica2part2dev.emplace_back(static_cast<size_t>(static_cast<double>(parts) * frac));
  }
  for (auto& row : ring.replica2part2dev) {
    for (auto& v : row) v = assignable[rng() % assignable.size()];
  }
  ring.version = seed;
  return ring;
}

}  // namespace apus::ring::testing
