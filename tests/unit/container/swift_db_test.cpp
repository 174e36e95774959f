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

namespace {

apus::container::ObjectRecord object(const std::string& name, const std::string& ts,
                                     bool deleted = false, int policy = 0) {
  apus::container::ObjectRecord r;
  r.name = name;
  r.created_at = ts;
  r.size = deleted ? 0 : 5;
  r.content_type = "text/plain";
  r.etag = "d41d8cd98f00b204e9800998ecf8427e";
  r.deleted = deleted;
  r.storage_policy_index = policy;
  return r;
}

}  // namespace

TEST_CASE("swift_db: a quarantined database leaves the store for a Swift file that reads back") {
  using apus::container::DbInfo;
  using apus::container::SwiftDbReader;
  Target t;
  REQUIRE(t.store
              ->update_info(t.db,
                            [](std::optional<DbInfo>& info) -> apus::common::Result<bool> {
                              DbInfo& i = info.emplace();
                              i.account = "AUTH_a";
                              i.container = "c";
                              i.partition = "7";
                              i.created_at = "1700000000.00000";
                              i.put_timestamp = "1700000000.00000";
                              i.status_changed_at = "1700000000.00000";
                              i.reported_put_timestamp = "1600000000.00000";
                              i.id = "the-id-sda";
                              i.metadata["X-Container-Meta-Color"] = {"blue", "1700000000.00000"};
                              i.policy_stats[0];
                              return true;
                            })
              .ok());
  REQUIRE(t.store
              ->merge_objects(t.db, {object("o1", "1700000001.00000"),
                                     object("o2", "1700000002.00000"),
                                     object("gone", "1700000003.00000", true),
                                     object("other-policy", "1700000004.00000", false, 1)})
              .ok());
  // A newer o1 takes a new ROWID: the sequence ends above the last row kept... until o2 too.
  REQUIRE(t.store->merge_objects(t.db, {object("o1", "1700000005.00000")}).ok());
  apus::container::SyncPoint peer{"peer-id-sdb", 3};
  REQUIRE(t.store->merge_syncs(t.db, {peer}).ok());
  auto before = t.store->get_info(t.db);
  REQUIRE(before.ok());
  REQUIRE(before->has_value());
  auto rows_before = t.store->objects_since(t.db, -1, 100);
  REQUIRE(rows_before.ok());
  auto row_ids = [](const std::vector<apus::container::ObjectRecord>& rows) {
    std::vector<std::string> out;
    for (const auto& r : rows) {
      out.push_back(r.name + "@" + std::to_string(r.rowid) + (r.deleted ? " deleted" : "") +
                    " p" + std::to_string(r.storage_policy_index) + " " + r.created_at);
    }
    return out;
  };

  auto dir = apus::container::quarantine_db(*t.store, apus::common::io::default_fs(), t.db,
                                            t.path("sda"), "no account replicas exist");
  REQUIRE(dir.ok());
  const std::string hash = t.db.substr(2);
  CHECK(*dir == t.path("sda") + "/quarantined/containers/" + hash);
  auto gone = t.store->get_info(t.db);
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());

  auto file = SwiftDbReader::open(*dir + "/" + hash + ".db", DbType::kContainer);
  REQUIRE(file.ok());
  const DbInfo& i = (*file)->info();
  CHECK(i.account == "AUTH_a");
  CHECK(i.container == "c");
  CHECK(i.put_timestamp == "1700000000.00000");
  CHECK(i.reported_put_timestamp == "1600000000.00000");
  CHECK(i.id == "the-id-sda");
  CHECK(i.hash == (*before)->hash);
  CHECK(i.object_count == 2);  // policy 0's live rows: o1 and o2
  CHECK(i.metadata.at("X-Container-Meta-Color").value == "blue");
  CHECK((*file)->max_row() == (*before)->max_row);
  REQUIRE((*file)->incoming_syncs().size() == 1);
  CHECK((*file)->incoming_syncs()[0].remote_id == "peer-id-sdb");
  CHECK((*file)->incoming_syncs()[0].sync_point == 3);
  auto rows = (*file)->objects_after(-1, 100);
  REQUIRE(rows.ok());
  CHECK(rows->size() == 4);  // o2, gone, other-policy, then the newer o1
  CHECK(row_ids(*rows) == row_ids(*rows_before));
  CHECK(rows->back().name == "o1");

  // The file goes back into a store whole: apus-db-import's path.
  auto merged = merge_swift_db(*dir + "/" + hash + ".db", *t.store, t.db, "sda", "", true, &kNames);
  REQUIRE(merged.ok());
  auto back = t.store->get_info(t.db);
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->hash == (*before)->hash);
  CHECK((*back)->policy_stats == (*before)->policy_stats);

  // A second quarantine of the same database keeps the first one's directory.
  auto again = apus::container::quarantine_db(*t.store, apus::common::io::default_fs(), t.db,
                                              t.path("sda"), "test");
  REQUIRE(again.ok());
  CHECK(*again != *dir);
  CHECK(again->rfind(*dir + "-", 0) == 0);
  CHECK(apus::container::quarantine_db(*t.store, apus::common::io::default_fs(), t.db,
                                       t.path("sda"), "test")
            .status()
            .is_not_found());
}
