// Fuzzes SSYNC's missing check lines (object-server/ssync.h), which a replication peer sends:
// every line decode_missing() takes must come back the same through encode_missing(), and its
// hash must be 32 hex digits (the receiver makes a path of it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "object-server/ssync.h"

namespace ssync = apus::object::ssync;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto offer = ssync::decode_missing(line);
  if (!offer) return 0;
  if (offer->hash.size() != 32 ||
      offer->hash.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    std::fprintf(stderr, "ssync_lines_fuzz: a hash that is not 32 hex digits\n");
    std::abort();
  }
  auto again = ssync::decode_missing(ssync::encode_missing(*offer));
  // encode_missing() writes the content-type delta only with a meta delta, as Swift's does.
  if (!again || again->ts_data != offer->ts_data || again->ts_meta != offer->ts_meta ||
      again->durable != offer->durable ||
      (offer->ts_meta != offer->ts_data && again->ts_ctype != offer->ts_ctype)) {
    std::fprintf(stderr, "ssync_lines_fuzz: encode_missing does not round-trip\n");
    std::abort();
  }
  (void)ssync::encode_wanted(*offer, ssync::LocalState{});
  return 0;
}
