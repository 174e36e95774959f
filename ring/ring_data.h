// RingData: the contents of a Swift `.ring.gz` file (format v1), and reading and writing it.
//
// A ring maps each partition to one device per replica: `replica2part2dev[r][part]` is the
// device id holding replica r of partition `part`. Rows are 2^part_power long, except that the
// last row may be shorter when the replica count is fractional (2.5 replicas: the third row
// covers half the partitions). Device ids index `devs`; removed devices leave a hole (nullopt).
// The byte-level format is in ring/FORMAT.md and swift-protocol.md §2.1.
//
// Thread-compatible value type. Reading and writing are blocking file I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace apus::common::io {
class Fs;
}

namespace apus::ring {

struct Device {
  int id = 0;
  int region = 1;
  int zone = 0;
  std::string ip;
  int port = 0;
  std::string replication_ip;  // defaults to ip when the file has none
  int replication_port = 0;    // defaults to port when the file has none
  std::string device;          // directory under `devices`, e.g. "sdb1"
  double weight = 0.0;
  std::string meta;
};

struct RingData {
  std::vector<std::optional<Device>> devs;              // index = device id
  std::vector<std::vector<uint16_t>> replica2part2dev;  // [replica row][partition]
  int part_shift = 32;                                  // 32 - part_power
  std::optional<int64_t> version;                       // builder version counter
  std::optional<int> next_part_power;                   // only during a part-power increase

  int part_power() const { return 32 - part_shift; }
  uint64_t partition_count() const { return uint64_t{1} << part_power(); }
  // rows - 1 + len(last row) / len(first row), as Swift computes it.
  double replica_count() const;
};

// Reads a `.ring.gz` file (either byte order). Corruption with a clear message for a truncated
// file, wrong magic, unsupported version or bad JSON; NotFound when the file is missing.
common::Result<RingData> load_ring_file(const std::string& path);

// Writes `ring` as stock Swift 2.30.1/2.35.0 would, byte for byte: gzip level 9 with Swift's
// fixed header mtime and FNAME, `R1NG` v1, the JSON header with sorted keys and Python's
// separators, the arrays in the native (little-endian on our platforms) byte order. Written to a
// temp file, fsynced, chmod 0644 and renamed into place.
common::Status write_ring_file(const RingData& ring, const std::string& path);

// The same two through a given filesystem (tests inject faults with a FaultInjectingFs).
common::Result<RingData> load_ring_file(const std::string& path, common::io::Fs& fs);
common::Status write_ring_file(const RingData& ring, const std::string& path, common::io::Fs& fs);

// The in-memory halves of the above. decode_ring() parses a whole `.ring.gz` file image (gzip
// or zlib wrapped, as Swift accepts) with the same checks as load_ring_file().
// encode_ring() returns the exact bytes write_ring_file() would store for a file whose base name
// is `file_name` (the gzip header records it without ".gz"). InvalidArgument when the data
// breaks the format's rules: part_shift outside 0..32, a row of the wrong length (all rows but
// the last must be full; the last may be shorter, never longer), a row naming a device id that
// is missing or null, a device whose id is not its index.
common::Result<RingData> decode_ring(std::string_view file_bytes);
common::Result<std::string> encode_ring(const RingData& ring, std::string_view file_name);

// The rules encode_ring() checks, on their own: OK or InvalidArgument saying what is wrong.
common::Status validate_ring_data(const RingData& ring);

// The JSON header encode_ring() writes for `ring` (for tests of the exact text).
std::string ring_header_json_for_test(const RingData& ring);

}  // namespace apus::ring
