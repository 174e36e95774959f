// ring_rewrite: loads a `.ring.gz` with Apus and writes it back with Apus, for the interop tests
// (tests/interop/ring_interop.py), which compare the result byte for byte with Swift's
// RingData.save() and load it in Swift's Ring.
//
//   ring_rewrite <in.ring.gz> <out.ring.gz>
//
// Exit status 0 on success, 1 with a message on stderr otherwise.

#include <cstdio>

#include "ring/ring_data.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ring_rewrite <in.ring.gz> <out.ring.gz>\n");
    return 1;
  }
  apus::common::Result<apus::ring::RingData> ring = apus::ring::load_ring_file(argv[1]);
  if (!ring.ok()) {
    std::fprintf(stderr, "ring_rewrite: %s\n", ring.status().to_string().c_str());
    return 1;
  }
  const apus::common::Status s = apus::ring::write_ring_file(*ring, argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "ring_rewrite: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
