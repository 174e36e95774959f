// Fuzzes what the proxy reads of a sharded container's answer (a Swift container server's, a
// peer's): parse_shard_ranges on the body, then find_shard_range for names from the input.
// A range taken must name "<account>/<container>" and have lower <= upper; a range found for a
// name must hold it, and the bound tests must agree with contains(). Any breach aborts.
//
// Input: a name, a newline, then the body.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/http/url.h"
#include "proxy/shard_ranges.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nl = input.find('\n');
  std::string_view item = nl == std::string_view::npos ? std::string_view() : input.substr(0, nl);
  std::string_view body = nl == std::string_view::npos ? input : input.substr(nl + 1);
  auto ranges = apus::proxy::parse_shard_ranges(body);
  if (!ranges) return 0;
  for (const auto& r : *ranges) {
    if (!apus::common::http::split_container_path(r.name)) std::abort();
    if (!r.upper.empty() && r.lower > r.upper) std::abort();
    if (r.contains(item) && (r.below(item) || r.above(item))) std::abort();
  }
  if (const auto* found = apus::proxy::find_shard_range(item, *ranges)) {
    if (!found->contains(item)) std::abort();
  }
  return 0;
}
