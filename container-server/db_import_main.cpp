// apus-db-import container|account DEVICES_DIR [--device NAME]...: loads a node's Swift
// container or account databases (SQLite files <device>/containers/<part>/<suffix>/<hash>/
// <hash>.db, or accounts/, with their .pending files) into the Apus store of each device
// (<device>/apus-containers or apus-accounts), for a node that moves from Swift to Apus
// (docs/migration.md). Run it with the Apus server of that kind stopped on the node (RocksDB
// has one writer). A database already in the store is merged with the file (rows and metadata
// by Swift's rules), so a second run adds only what changed. The SQLite files are left as they
// are. Prints per device: databases, rows, pending rows, failures; exit status 1 if any failed.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/io/fs.h"
#include "container-server/db_server.h"
#include "container-server/listing_db.h"
#include "container-server/swift_db.h"

namespace {

using apus::container::DbType;
using apus::container::ListingStore;

struct Totals {
  size_t databases = 0;
  int64_t rows = 0;
  size_t pending_rows = 0;
  size_t failed = 0;
};

// Swift's tree: numeric partitions and 32-hex-digit hashes (the store's names); anything else
// (a temp or quarantine leftover) is not a database.
bool numeric(const std::string& s) {
  return !s.empty() && s.size() <= 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool hex_hash(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::vector<std::string> sorted_dir(apus::common::io::Fs& fs, const std::string& path) {
  auto names = fs.list_dir(path);
  if (!names.ok()) return {};
  std::sort(names->begin(), names->end());
  return *names;
}

// Imports one database directory <part>/<suffix>/<hash>/.
void import_db(apus::common::io::Fs& fs, ListingStore& store, const std::string& device,
               const std::string& part, const std::string& dir, const std::string& hash,
               Totals& totals) {
  const std::string file = dir + "/" + hash + ".db";
  auto st = fs.stat(file);
  if (!st.ok() || !st->exists) return;  // a directory without a database (quarantine leftovers)
  const std::string db = part + "/" + hash;
  auto existing = store.get_info(db);
  const bool create = existing.ok() && !existing->has_value();
  // The operator's own node's files: their names are not checked against the hashes (that
  // needs the cluster's swift.conf); the rows and stat row are checked as a peer's are.
  auto rows = apus::container::merge_swift_db(file, store, db, device, "", create, nullptr);
  if (!rows.ok()) {
    std::fprintf(stderr, "%s: %s\n", file.c_str(), rows.status().to_string().c_str());
    ++totals.failed;
    return;
  }
  ++totals.databases;
  totals.rows += *rows;
  auto pending = fs.read_file(file + ".pending");
  if (!pending.ok()) {
    if (pending.status().is_not_found()) return;  // none
    // Rows only the pending file holds would be lost: the database counts as failed.
    std::fprintf(stderr, "%s.pending: %s\n", file.c_str(), pending.status().to_string().c_str());
    ++totals.failed;
    return;
  }
  auto parsed = apus::container::parse_pending(*pending, store.type());
  apus::common::Status merged = store.type() == DbType::kContainer
                                    ? store.merge_objects(db, parsed.objects)
                                    : store.merge_containers(db, parsed.containers);
  if (!merged.ok()) {
    std::fprintf(stderr, "%s.pending: %s\n", file.c_str(), merged.to_string().c_str());
    ++totals.failed;
    return;
  }
  totals.pending_rows += parsed.objects.size() + parsed.containers.size();
  if (parsed.bad) {
    std::fprintf(stderr, "%s.pending: %zu entries that do not decode, skipped\n", file.c_str(),
                 parsed.bad);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[1]) != "container" && std::string(argv[1]) != "account")) {
    std::fprintf(stderr, "usage: %s container|account DEVICES_DIR [--device NAME]...\n", argv[0]);
    return 2;
  }
  const DbType type = std::string(argv[1]) == "container" ? DbType::kContainer : DbType::kAccount;
  const std::string devices_dir = argv[2];
  std::vector<std::string> only;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      only.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  auto& fs = apus::common::io::default_fs();
  const std::string kind_dir = type == DbType::kContainer ? "containers" : "accounts";
  const std::string store_dir = type == DbType::kContainer ? "apus-containers" : "apus-accounts";
  bool failed = false;
  for (const std::string& device : sorted_dir(fs, devices_dir)) {
    if (!only.empty() && std::find(only.begin(), only.end(), device) == only.end()) continue;
    const std::string root = devices_dir + "/" + device + "/" + kind_dir;
    auto st = fs.stat(root);
    if (!st.ok() || !st->exists || !st->is_dir) continue;
    apus::container::StoreOptions options;
    options.type = type;
    options.sync_writes = false;  // one fsync at the end (the store's close flushes the WAL)
    auto store = ListingStore::open(devices_dir + "/" + device + "/" + store_dir, options);
    if (!store.ok()) {
      std::fprintf(stderr, "%s: cannot open the store (is the server still running?): %s\n",
                   device.c_str(), store.status().to_string().c_str());
      failed = true;
      continue;
    }
    Totals totals;
    for (const std::string& part : sorted_dir(fs, root)) {
      if (!numeric(part)) continue;
      for (const std::string& suffix : sorted_dir(fs, root + "/" + part)) {
        for (const std::string& hash : sorted_dir(fs, root + "/" + part + "/" + suffix)) {
          if (!hex_hash(hash)) continue;
          import_db(fs, **store, device, part, root + "/" + part + "/" + suffix + "/" + hash,
                    hash, totals);
        }
      }
    }
    store->reset();
    std::printf("%s: %zu %s databases, %lld rows, %zu pending rows, %zu failed\n",
                device.c_str(), totals.databases, argv[1], static_cast<long long>(totals.rows),
                totals.pending_rows, totals.failed);
    failed = failed || totals.failed > 0;
  }
  return failed ? 1 : 0;
}
