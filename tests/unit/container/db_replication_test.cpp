// The listing store's replication pieces (sync points, rows since a ROWID, removal of a
// replica) and the REPLICATE bodies and answers both sides exchange.
#include "container-server/db_replication.h"

#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "container-server/listing_db.h"
#include "tests/support/temp_dir.h"

using apus::common::Result;
using apus::container::ContainerRecord;
using apus::container::DbInfo;
using apus::container::DbType;
using apus::container::ListingStore;
using apus::container::ObjectRecord;
using apus::container::RemoteInfo;
using apus::container::StoreOptions;
using apus::container::SyncPoint;

namespace {

struct Replica : apus::test::TempDir {
  std::unique_ptr<ListingStore> store;
  explicit Replica(DbType type = DbType::kContainer) : TempDir("apus_db_repl") {
    StoreOptions o;
    o.type = type;
    o.sync_writes = false;
    store = ListingStore::open(path("db"), o).value();
  }
  void create(const std::string& db) {
    REQUIRE(store
                ->update_info(db,
                              [&](std::optional<DbInfo>& info) -> Result<bool> {
                                info.emplace();
                                info->account = "a";
                                info->container = "c";
                                info->id = "id-" + db;
                                info->put_timestamp = "1700000000.00000";
                                return true;
                              })
                .ok());
  }
  static ObjectRecord object(const std::string& name, const std::string& ts, int64_t rowid = 0) {
    ObjectRecord r;
    r.name = name;
    r.created_at = ts;
    r.size = 3;
    r.content_type = "text/plain";
    r.etag = "e";
    r.rowid = rowid;
    return r;
  }
  int64_t point(const std::string& db, const std::string& remote) {
    auto syncs = store->get_syncs(db);
    REQUIRE(syncs.ok());
    for (const SyncPoint& p : *syncs) {
      if (p.remote_id == remote) return p.sync_point;
    }
    return -1;
  }
};

}  // namespace

TEST_CASE_FIXTURE(Replica, "merge_items moves the source's incoming point, even with no newer row") {
  create("0/db");
  SyncPoint source{"peer-1", 7};
  REQUIRE(store->merge_objects("0/db", {object("o1", "1700000001.00000", 7)}, &source).ok());
  CHECK(point("0/db", "peer-1") == 7);
  // The same row again (nothing newer) from further on in the peer's rows: the point moves.
  source.sync_point = 9;
  REQUIRE(store->merge_objects("0/db", {object("o1", "1700000001.00000", 9)}, &source).ok());
  CHECK(point("0/db", "peer-1") == 9);
  CHECK((*store->get_info("0/db"))->max_row == 1);
  // An older point never moves it back.
  source.sync_point = 3;
  REQUIRE(store->merge_objects("0/db", {}, &source).ok());
  CHECK(point("0/db", "peer-1") == 9);
}

TEST_CASE_FIXTURE(Replica, "merge_syncs keeps the highest point per remote and is bounded") {
  create("0/db");
  REQUIRE(store->merge_syncs("0/db", {{"a", 5}, {"b", 2}}).ok());
  REQUIRE(store->merge_syncs("0/db", {{"a", 3}, {"b", 4}, {"c", -1}}).ok());
  auto syncs = *store->get_syncs("0/db");
  REQUIRE(syncs.size() == 3);
  CHECK(syncs[0].remote_id == "a");
  CHECK(syncs[0].sync_point == 5);
  CHECK(syncs[1].sync_point == 4);
  CHECK(syncs[2].sync_point == -1);
  CHECK(store->merge_syncs("nope", {{"a", 1}}).is_not_found());
  std::vector<SyncPoint> many;
  for (size_t i = 0; i <= ListingStore::kMaxSyncPoints; ++i) many.push_back({std::to_string(i), 1});
  CHECK(store->merge_syncs("0/db", many).code() == apus::common::Status::Code::kInvalidArgument);
  CHECK(store->get_syncs("0/db")->size() == 3);
}

TEST_CASE_FIXTURE(Replica, "remove_db removes an unchanged replica whole, and nothing else") {
  create("0/db");
  create("0/db2");
  REQUIRE(store->merge_objects("0/db", {object("o1", "1700000001.00000")}).ok());
  REQUIRE(store->merge_objects("0/db2", {object("o1", "1700000001.00000")}).ok());
  REQUIRE(store->merge_syncs("0/db", {{"a", 5}}).ok());
  DbInfo info = **store->get_info("0/db");
  CHECK(store->remove_db("0/db", info.id, info.max_row - 1).code() ==
        apus::common::Status::Code::kConflict);
  CHECK(store->remove_db("0/db", "another-id", info.max_row).code() ==
        apus::common::Status::Code::kConflict);
  REQUIRE(store->remove_db("0/db", info.id, info.max_row).ok());
  CHECK_FALSE(store->get_info("0/db")->has_value());
  CHECK(store->objects_since("0/db", -1, 10).status().is_not_found());
  // Made again: no row or sync point of the old replica comes back.
  create("0/db");
  CHECK(store->objects_since("0/db", -1, 10)->empty());
  CHECK(store->get_syncs("0/db")->empty());
  CHECK(store->objects_since("0/db2", -1, 10)->size() == 1);
  CHECK(store->remove_db("0/none", "x", 0).is_not_found());
}

TEST_CASE("containers_since walks an account's rows in ROWID order") {
  Replica r(DbType::kAccount);
  r.create("0/acct");
  ContainerRecord a{.name = "a", .put_timestamp = "1700000001.00000"};
  ContainerRecord b{.name = "b", .put_timestamp = "1700000002.00000"};
  REQUIRE(r.store->merge_containers("0/acct", {a, b}).ok());
  a.object_count = 4;
  REQUIRE(r.store->merge_containers("0/acct", {a}).ok());  // "a" moves to the end
  auto rows = r.store->containers_since("0/acct", -1, 10);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);
  CHECK((*rows)[0].name == "b");
  CHECK((*rows)[1].name == "a");
  CHECK((*rows)[1].object_count == 4);
  CHECK((*rows)[1].rowid == 3);
  CHECK(r.store->containers_since("0/acct", 2, 10)->size() == 1);
  CHECK_FALSE(r.store->objects_since("0/acct", -1, 10).ok());
}

TEST_CASE("sync bodies carry Swift's arguments in Swift's order") {
  DbInfo info;
  info.max_row = 12;
  info.hash = std::string(32, 'a');
  info.id = "uuid-sda";
  info.created_at = "1700000000.00000";
  info.put_timestamp = "1700000001.00000";
  info.status_changed_at = "1700000001.00000";
  info.storage_policy_index = 1;
  info.metadata["X-Container-Meta-A"] = {"v", "1700000002.00000"};
  auto body = boost::json::parse(apus::container::sync_request(info, DbType::kContainer, true));
  const auto& a = body.as_array();
  REQUIRE(a.size() == 11);
  CHECK(a[0] == "sync");
  CHECK(a[1] == 12);
  CHECK(a[3] == "uuid-sda");
  CHECK(a[6] == "0");
  auto md = boost::json::parse(a[7].as_string());
  CHECK(md.at("X-Container-Meta-A").as_array()[0] == "v");
  CHECK(a[10] == 1);
  // One policy, or an account: the seven arguments only; no metadata is "".
  info.metadata.clear();
  auto plain = boost::json::parse(apus::container::sync_request(info, DbType::kAccount, true));
  CHECK(plain.as_array().size() == 8);
  CHECK(plain.as_array()[7] == "");
}

TEST_CASE("parse_sync_answer reads a Swift container server's answer") {
  // As Swift 2.30.1's ContainerReplicatorRpc answers (keys abridged to what is read).
  auto r = apus::container::parse_sync_answer(
      R"({"account": "AUTH_a", "container": "c", "created_at": "1700000000.00000",)"
      R"( "put_timestamp": "1700000001.00000", "delete_timestamp": "0",)"
      R"( "status_changed_at": "1700000001.00000", "count": 3, "bytes_used": 9,)"
      R"( "hash": "abc", "id": "x-sdb", "storage_policy_index": 2,)"
      R"( "metadata": "{\"X-Container-Meta-B\": [\"w\", \"1700000003.00000\"]}",)"
      R"( "max_row": 40, "shard_max_row": -1, "point": 17, "db_state": "unsharded"})");
  REQUIRE(r.ok());
  CHECK(r->point == 17);
  CHECK(r->max_row == 40);
  CHECK(r->count == 3);
  CHECK(r->storage_policy_index == 2);
  CHECK(r->shard_max_row == -1);
  CHECK(r->metadata.at("X-Container-Meta-B").value == "w");
  CHECK_FALSE(apus::container::parse_sync_answer("[1]").ok());
  CHECK_FALSE(apus::container::parse_sync_answer("{\"point\": 1}").ok());
}

TEST_CASE("remote_policy_wins follows Swift's cmp_policy_info") {
  DbInfo local;
  local.put_timestamp = "1700000001.00000";
  local.delete_timestamp = "0";
  local.status_changed_at = "1700000001.00000";
  local.storage_policy_index = 0;
  RemoteInfo remote;
  remote.put_timestamp = "1700000002.00000";
  remote.delete_timestamp = "0";
  remote.status_changed_at = "1700000002.00000";
  remote.storage_policy_index = 1;
  // Neither deleted nor recreated: the oldest status change wins.
  CHECK_FALSE(apus::container::remote_policy_wins(local, remote));
  remote.status_changed_at = "1700000000.50000";
  CHECK(apus::container::remote_policy_wins(local, remote));
  // The same index: nothing to change.
  remote.storage_policy_index = 0;
  CHECK_FALSE(apus::container::remote_policy_wins(local, remote));
  remote.storage_policy_index = 1;
  // A deleted local replica loses to a live one.
  local.delete_timestamp = "1700000003.00000";
  CHECK(apus::container::remote_policy_wins(local, remote));
  // A recreated remote beats a replica never deleted.
  local.delete_timestamp = "0";
  remote.delete_timestamp = "1700000001.50000";
  remote.put_timestamp = "1700000004.00000";
  CHECK(apus::container::remote_policy_wins(local, remote));
}

TEST_CASE("UPDATE bodies: rows are checked") {
  auto rows = apus::container::parse_object_rows(
      R"([{"name": "o", "created_at": "1700000000.00000", "size": 1, "content_type": "t",)"
      R"( "etag": "e", "deleted": 0}])");
  REQUIRE(rows);
  CHECK(rows->size() == 1);
  CHECK_FALSE(apus::container::parse_object_rows(R"([{"created_at": "1"}])"));
  CHECK_FALSE(apus::container::parse_object_rows(R"([{"name": "\ud800", "created_at": "1"}])"));
  CHECK_FALSE(apus::container::parse_object_rows("{}"));
}
