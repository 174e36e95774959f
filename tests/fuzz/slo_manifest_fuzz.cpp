// Fuzzes the SLO manifest code of proxy/slo_manifest.h with what a client controls: the body of
// a ?multipart-manifest=put, and (as a stored manifest could be written by anyone's proxy) the
// JSON read back on GET.
//
// Besides the sanitizers, it checks what the slo middleware relies on: an accepted manifest has
// an object-backed segment, inline data is never empty and ranges are single; a stored manifest
// written by to_stored_json() reads back to the same segments, etag and length; and the pieces
// of any byte range lie inside their segments and add up to the range's length.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "proxy/slo_manifest.h"

namespace slo = apus::proxy::slo;

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "slo_manifest_fuzz: %s\n", what);
  std::abort();
}

void check_input(std::string_view body) {
  auto parsed = slo::parse_manifest_input(body, "/v1/AUTH_a/c/manifest");
  if (!parsed) {
    int status = parsed.refusal().status;
    if (status != 400 && status != 500) fail("refusal is neither 400 nor 500");
    return;
  }
  bool object_backed = false;
  for (const slo::InputSegment& s : *parsed) {
    if (s.is_data && s.data.empty()) fail("empty inline data accepted");
    if (!s.is_data) object_backed = true;
  }
  if (!parsed->empty() && !object_backed) fail("inline-only manifest accepted");
}

void check_stored(std::string_view text) {
  auto stored = slo::parse_stored(text);
  if (!stored.ok()) return;
  const std::string again = slo::to_stored_json(*stored);
  auto back = slo::parse_stored(again);
  if (!back.ok()) fail("our own stored manifest does not read back");
  if (slo::slo_etag(*back) != slo::slo_etag(*stored)) fail("etag changed on a round trip");
  if (slo::to_stored_json(*back) != again) fail("stored JSON changed on a round trip");
  const int64_t total = slo::total_length(*stored);
  if (total <= 0 || total > (int64_t{1} << 40)) return;  // lengths a client's manifest may lie about
  for (const slo::StoredSegment& s : *stored) {
    if (s.length() < 0) return;
  }
  const int64_t first = total / 3, last = total - 1 - total / 5;
  if (last < first) return;
  int64_t covered = 0;
  for (const slo::Piece& p : slo::pieces_for_range(*stored, first, last)) {
    const slo::StoredSegment& s = (*stored)[p.index];
    int64_t start = s.range ? s.range->first : 0;
    int64_t end = s.is_data ? s.length() - 1 : (s.range ? s.range->second : s.bytes - 1);
    if (p.first < start || p.last > end || p.last < p.first) fail("piece outside its segment");
    covered += p.last - p.first + 1;
  }
  if (covered != last - first + 1) fail("pieces do not add up to the range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  check_input(text);
  check_stored(text);
  return 0;
}
