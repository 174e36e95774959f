// Fuzzes the bulk-delete body parser (proxy/bulk_delete_list.h), the part of bulk-delete a
// client controls byte for byte.
//
// Input: the first byte picks the chunk size the body arrives in (1 to 256), the second the
// max_deletes limit (0 to 255); the rest is the body. max_path_length is 16, so both of
// Swift's limits are reached often.
//
// Besides the sanitizers, it checks what the middleware relies on: the outcome does not depend
// on how the body is split, a refusal is 413 or 400 with Swift's text, and an accepted body
// gives at most max_deletes names, none longer than the line limit allows.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/bulk_delete_list.h"

namespace {

constexpr size_t kMaxPath = 16;

void fail(const char* what) {
  std::fprintf(stderr, "bulk_delete_fuzz: %s\n", what);
  std::abort();
}

struct Outcome {
  std::optional<apus::proxy::DeleteListError> error;
  std::vector<std::string> names;
};

Outcome parse(std::string_view body, size_t chunk, size_t max_deletes) {
  apus::proxy::DeleteListParser p(max_deletes, kMaxPath);
  Outcome o;
  for (size_t i = 0; i < body.size() && !o.error; i += chunk)
    o.error = p.feed(body.substr(i, chunk));
  if (!o.error) o.error = p.finish();
  o.names = p.take_names();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t chunk = size_t{data[0]} + 1;
  size_t max_deletes = data[1];
  std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);

  Outcome split = parse(body, chunk, max_deletes);
  Outcome whole = parse(body, body.size() + 1, max_deletes);
  if (split.error != whole.error) fail("outcome depends on the chunking");
  if (split.error) {
    bool known = (split.error->status == 413 &&
                  split.error->body ==
                      "Maximum Bulk Deletes: " + std::to_string(max_deletes) + " per request") ||
                 (split.error->status == 400 && split.error->body == "Invalid File Name");
    if (!known) fail("unexpected refusal");
    return 0;
  }
  if (split.names != whole.names) fail("names depend on the chunking");
  if (split.names.size() > max_deletes) fail("more names than max_deletes");
  for (const auto& n : split.names) {
    if (n.size() > 3 * kMaxPath) fail("name longer than a line may be");
  }
  return 0;
}
