// Fuzzes what a database replication peer sends (container-server/db_replication.h): a "sync"
// answer, UPDATE/merge_items rows and metadata, and a Swift .pending file's records. Rows that
// parse must have a valid UTF-8 name (the store keys and listings use it); metadata timestamps
// are bounded.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "container-server/db_replication.h"
#include "container-server/swift_db.h"

namespace container = apus::container;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "replicate_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto answer = container::parse_sync_answer(text); answer.ok()) {
    for (const auto& [key, item] : answer->metadata) {
      if (item.timestamp.size() > 100) fail("a metadata timestamp over 100 bytes");
    }
  }
  if (auto rows = container::parse_object_rows(text)) {
    for (const auto& row : *rows) {
      if (!container::good_row(row)) fail("a JSON row that fails good_row");
    }
  }
  (void)container::metadata_from_json(text);
  auto pending = container::parse_pending(text, container::DbType::kContainer);
  for (const auto& row : pending.objects) {
    if (!container::good_row(row)) fail("a pending object row that fails good_row");
  }
  for (const auto& row : container::parse_pending(text, container::DbType::kAccount).containers) {
    if (!container::good_row(row)) fail("a pending container row that fails good_row");
  }
  return 0;
}
