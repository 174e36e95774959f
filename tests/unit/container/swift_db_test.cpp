// A Swift database file from a peer (complete_rsync, rsync_then_merge) is hostile input:
// merge_swift_db() must not run forever on its schema, must refuse a stat row naming another
// database, must skip rows a peer's JSON could not carry, and must keep the sender's sync point
// within the store's limit.
#include "container-server/swift_db.h"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <chrono>
#include <string>

#include "common/hash_path.h"
#include "container-server/listing_db.h"
#include "tests/support/temp_dir.h"

using apus::common::HashPathConfig;
using apus::container::DbType;
using apus::container::ListingStore;
using apus::container::merge_swift_db;
using apus::container::StoreOptions;

namespace {

const HashPathConfig kNames{"pre", "suf"};

// A container database file in Swift's newer schema (container_info table and the
// container_stat view over it), made by running `sql` after the stat row is in.
void make_file(const std::string& path, const std::string& account, const std::string& container,
               const std::string& sql, bool endless_stat = false) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  std::string schema =
      "CREATE TABLE object (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, created_at TEXT,"
      " size INTEGER, content_type TEXT, etag TEXT, deleted INTEGER DEFAULT 0,"
      " storage_policy_index INTEGER DEFAULT 0);"
      "CREATE TABLE incoming_sync (remote_id TEXT UNIQUE, sync_point INTEGER,"
      " updated_at TEXT DEFAULT 0);"
      "CREATE TABLE container_info (account TEXT, container TEXT, created_at TEXT,"
      " put_timestamp TEXT DEFAULT '0', delete_timestamp TEXT DEFAULT '0', status TEXT DEFAULT '',"
      " status_changed_at TEXT DEFAULT '0', hash TEXT DEFAULT '00000000000000000000000000000000',"
      " id TEXT, metadata TEXT DEFAULT '', storage_policy_index INTEGER DEFAULT 0);";
  // A view that never ends: a recursive count with nothing to stop it, sorted.
  schema += endless_stat
                ? "CREATE VIEW container_stat AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                  "SELECT i + 1 FROM n) SELECT i AS account FROM n ORDER BY i;"
                : "CREATE VIEW container_stat AS SELECT * FROM container_info;";
  REQUIRE(sqlite3_exec(db, schema.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  std::string stat = "INSERT INTO container_info (account, container, created_at, put_timestamp,"
                     " id) VALUES ('" + account + "', '" + container +
                     "', '1700000000.00000', '1700000000.00000', 'peer-id');";
  REQUIRE(sqlite3_exec(db, stat.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

struct Target : apus::test::TempDir {
  std::unique_ptr<ListingStore> store;
  std::string db;
  Target() : TempDir("apus_swift_db") {
    StoreOptions o;
    o.type = DbType::kContainer;
    o.sync_writes = false;
    store = ListingStore::open(path("store"), o).value();
    db = "7/" + apus::common::hash_path_hex(kNames, "AUTH_a", "c").value();
  }
};

std::string object_row(int rowid, const std::string& name_sql, int policy = 0) {
  return "INSERT INTO object VALUES (" + std::to_string(rowid) + ", " + name_sql +
         ", '1700000001.00000', 10, 'text/plain', 'etag', 0, " + std::to_string(policy) + ");";
}

}  // namespace

TEST_CASE("swift_db: a good file makes the replica, rows and the sender's sync point") {
  Target t;
  const std::string file = t.path("good.db");
  make_file(file, "AUTH_a", "c", object_row(1, "'o1'") + object_row(2, "'o2'"));
  auto rows = merge_swift_db(file, *t.store, t.db, "sda", "sender-id", true, &kNames);
  REQUIRE(rows.ok());
  CHECK(*rows == 2);
  auto syncs = t.store->get_syncs(t.db);
  REQUIRE(syncs.ok());
  REQUIRE(syncs->size() == 1);
  CHECK(syncs->front().remote_id == "sender-id");
  CHECK(syncs->front().sync_point == 2);
}

TEST_CASE("swift_db: a view that never ends is cut off, not run forever") {
  Target t;
  const std::string file = t.path("endless.db");
  make_file(file, "AUTH_a", "c", "", /*endless_stat=*/true);
  const auto began = std::chrono::steady_clock::now();
  auto rows = merge_swift_db(file, *t.store, t.db, "sda", "sender-id", true, &kNames);
  CHECK(!rows.ok());
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(30));
  CHECK(!t.store->get_info(t.db).value().has_value());
}

TEST_CASE("swift_db: names that do not hash to the database are refused, nothing made") {
  Target t;
  const std::string file = t.path("other.db");
  make_file(file, "AUTH_other", "c", object_row(1, "'o1'"));
  auto rows = merge_swift_db(file, *t.store, t.db, "sda", "sender-id", true, &kNames);
  CHECK(rows.status().code() == apus::common::Status::Code::kInvalidArgument);
  CHECK(!t.store->get_info(t.db).value().has_value());
}

TEST_CASE("swift_db: rows a peer's JSON could not carry are skipped, the others kept") {
  Target t;
  const std::string file = t.path("bad-rows.db");
  // An empty name, a NULL one, bytes that are not UTF-8, a negative policy, then a good row.
  make_file(file, "AUTH_a", "c",
            object_row(1, "''") + object_row(2, "NULL") + object_row(3, "CAST(x'ff' AS TEXT)") +
                object_row(4, "'neg'", -1) + object_row(5, "'good'"));
  auto rows = merge_swift_db(file, *t.store, t.db, "sda", "sender-id", true, &kNames);
  REQUIRE(rows.ok());
  CHECK(*rows == 1);
  auto info = t.store->get_info(t.db).value();
  REQUIRE(info.has_value());
  CHECK(info->container_objects() == 1);
}

TEST_CASE("swift_db: the sender's sync point is kept within the store's limit") {
  Target t;
  const std::string file = t.path("syncs.db");
  std::string points;
  for (size_t i = 0; i < ListingStore::kMaxSyncPoints + 5; ++i) {
    points += "INSERT INTO incoming_sync (remote_id, sync_point) VALUES ('peer-" +
              std::to_string(i) + "', 1);";
  }
  points += "INSERT INTO incoming_sync (remote_id, sync_point) VALUES ('bad id', 1);";
  make_file(file, "AUTH_a", "c", object_row(1, "'o1'") + points);
  auto rows = merge_swift_db(file, *t.store, t.db, "sda", "sender-id", true, &kNames);
  REQUIRE(rows.ok());
  auto syncs = t.store->get_syncs(t.db);
  REQUIRE(syncs.ok());
  CHECK(syncs->size() == ListingStore::kMaxSyncPoints);
  bool sender = false, bad = false;
  for (const auto& p : *syncs) {
    sender = sender || p.remote_id == "sender-id";
    bad = bad || p.remote_id == "bad id";
  }
  CHECK(sender);
  CHECK(!bad);
}
