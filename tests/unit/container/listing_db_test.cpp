#include "container-server/listing_db.h"

#include <doctest/doctest.h>

#include <future>
#include <map>
#include <random>
#include <thread>

#include "common/timestamp.h"
#include "tests/support/temp_dir.h"

using apus::common::Result;
using apus::container::ContainerRecord;
using apus::container::DbInfo;
using apus::container::DbType;
using apus::container::ListingQuery;
using apus::container::ListingStore;
using apus::container::ObjectRecord;
using apus::container::StoreOptions;
using apus::container::Waiting;
using apus::container::WalSync;
using apus::common::Status;

namespace {

struct Store : apus::test::TempDir {
  std::unique_ptr<ListingStore> store;
  explicit Store(DbType type = DbType::kContainer) : TempDir("apus_listing") {
    StoreOptions o;
    o.type = type;
    o.sync_writes = false;
    store = ListingStore::open(path("db"), o).value();
  }
  void create(const std::string& db, int policy = 0) {
    REQUIRE(store
                ->update_info(db,
                              [&](std::optional<DbInfo>& info) -> Result<bool> {
                                info.emplace();
                                info->account = "a";
                                info->container = db;
                                info->put_timestamp = "1700000000.00000";
                                info->storage_policy_index = policy;
                                info->policy_stats[policy];
                                return true;
                              })
                .ok());
  }
  void put(const std::string& db, const std::string& name, const std::string& ts,
           int64_t size = 1, bool deleted = false, int policy = 0) {
    ObjectRecord r;
    r.name = name;
    r.created_at = ts;
    r.size = deleted ? 0 : size;
    r.content_type = deleted ? "application/deleted" : "text/plain";
    r.etag = deleted ? "noetag" : "e";
    r.deleted = deleted;
    r.storage_policy_index = policy;
    REQUIRE(store->merge_objects(db, {r}).ok());
  }
  DbInfo info(const std::string& db) { return **store->get_info(db); }
  std::vector<std::string> names(const std::string& db, const ListingQuery& q) {
    std::vector<std::string> out;
    auto listed = store->list_objects(db, q);
    REQUIRE(listed.ok());
    for (const auto& e : *listed) {
      out.push_back(e.subdir ? "[" + e.row.name + "]" : e.row.name);
    }
    return out;
  }
};

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("chexor XORs MD5 of name-timestamp into the hash") {
  // The expected value is Swift's chexor('0' * 32, 'o', '1'); applying it twice undoes it.
  std::string zero(32, '0');
  std::string once = apus::container::chexor(zero, "o", "1");
  CHECK(once == "ab8e7263ab3ab8220b9ada31fa9c435c");
  CHECK(apus::container::chexor(once, "o", "1") == zero);
}

TEST_CASE("increment_last_char steps the last code point") {
  using apus::container::increment_last_char;
  CHECK(increment_last_char("ab") == "ac");
  CHECK(increment_last_char("/") == "0");
  CHECK(increment_last_char("caf\xc3\xa9") == "caf\xc3\xaa");    // é -> ê
  CHECK(increment_last_char("\x7f") == "\xc2\x80");             // U+007F -> U+0080
  CHECK(increment_last_char("\xef\xbf\xbf") == "\xf0\x90\x80\x80");  // U+FFFF -> U+10000
}

TEST_CASE("merge_object_record keeps the newest data, content type and meta independently") {
  using apus::container::merge_object_record;
  ObjectRecord existing;
  existing.created_at = "1700000002.00000";
  existing.size = 10;
  existing.etag = "old";
  existing.content_type = "text/plain;swift_bytes=99";

  SUBCASE("an older PUT changes nothing") {
    ObjectRecord u;
    u.created_at = "1700000001.00000";
    u.size = 5;
    u.etag = "new";
    u.content_type = "a/b";
    CHECK_FALSE(merge_object_record(u, &existing));
  }
  SUBCASE("a newer content-type timestamp alone moves the type but keeps data and swift_bytes") {
    ObjectRecord u;
    u.created_at = "1700000001.00000";
    u.size = 5;
    u.etag = "new";
    u.content_type = "image/png";
    u.ctype_timestamp = "1700000003.00000";
    CHECK(merge_object_record(u, &existing));
    CHECK(u.size == 10);
    CHECK(u.etag == "old");
    CHECK(u.content_type == "image/png;swift_bytes=99");
    // data 2, ctype 3, meta 3
    CHECK(u.created_at == apus::common::encode_timestamps(
                              *apus::common::Timestamp::parse("1700000002"),
                              *apus::common::Timestamp::parse("1700000003"),
                              *apus::common::Timestamp::parse("1700000003")));
  }
  SUBCASE("a newer PUT replaces everything") {
    ObjectRecord u;
    u.created_at = "1700000005.00000";
    u.size = 7;
    u.etag = "new";
    u.content_type = "a/b";
    CHECK(merge_object_record(u, &existing));
    CHECK(u.size == 7);
    CHECK(u.content_type == "a/b");
    CHECK(u.created_at == "1700000005.00000");
  }
}

TEST_CASE("object rows: counts follow merges, tombstones and policies") {
  Store s;
  s.create("c1");
  CHECK(s.store->merge_objects("nope", {}).is_not_found());
  s.put("c1", "a", "1700000001.00000", 10);
  s.put("c1", "b", "1700000001.00000", 20);
  s.put("c1", "a", "1700000000.50000", 99);  // older: ignored
  DbInfo i = s.info("c1");
  CHECK(i.container_objects() == 2);
  CHECK(i.container_bytes() == 30);
  s.put("c1", "a", "1700000002.00000", 0, /*deleted=*/true);
  i = s.info("c1");
  CHECK(i.container_objects() == 1);
  CHECK(i.container_bytes() == 20);
  CHECK_FALSE(i.empty(DbType::kContainer));
  s.put("c1", "z", "1700000002.00000", 5, false, /*policy=*/1);
  i = s.info("c1");
  CHECK(i.container_objects() == 1);  // policy 0's count
  CHECK(i.policy_stats[1].object_count == 1);
  // Rows of other policies are not listed, and tombstones never are.
  CHECK(s.names("c1", ListingQuery{}) == Names{"b"});
  ListingQuery p1;
  p1.storage_policy_index = 1;
  CHECK(s.names("c1", p1) == Names{"z"});
  CHECK(i.max_row == 4);  // a, b, a deleted, z
}

// Expected listings were produced by Swift 2.30.1's ContainerBroker on the same rows.
TEST_CASE("listing walks like Swift's list_objects_iter") {
  Store s;
  s.create("c");
  for (const char* n : {"a", "a/", "a/b", "a/b/c", "a/b0", "a//b", "b-1", "b-2", "c\xc3\xa9",
                        "d/e/f"}) {
    s.put("c", n, "1700000001.00000");
  }
  s.put("c", std::string("\0x", 2), "1700000001.00000");  // reserved: hidden by default
  ListingQuery q;
  CHECK(s.names("c", q) ==
        Names{"a", "a/", "a//b", "a/b", "a/b/c", "a/b0", "b-1", "b-2", "c\xc3\xa9", "d/e/f"});
  q.limit = 3;
  q.marker = "a/";
  CHECK(s.names("c", q) == Names{"a//b", "a/b", "a/b/c"});

  ListingQuery d;
  d.delimiter = "/";
  CHECK(s.names("c", d) == Names{"a", "[a/]", "b-1", "b-2", "c\xc3\xa9", "[d/]"});
  d.prefix = "a/";
  CHECK(s.names("c", d) == Names{"a/", "[a//]", "a/b", "[a/b/]", "a/b0"});
  d.reverse = true;
  CHECK(s.names("c", d) == Names{"a/b0", "[a/b/]", "a/b", "[a//]", "a/"});

  ListingQuery dash;
  dash.delimiter = "-";
  dash.marker = "b-";  // the subdir equal to the marker is not repeated
  CHECK(s.names("c", dash) == Names{"c\xc3\xa9", "d/e/f"});

  ListingQuery path;
  path.path = "a";
  // Swift skips deeper names, and (a quirk it has) the name right after a skipped subtree.
  CHECK(s.names("c", path) == Names{"a/b"});

  ListingQuery rev;
  rev.reverse = true;
  rev.marker = "b-2";
  rev.end_marker = "a/b";
  CHECK(s.names("c", rev) == Names{"b-1", "a/b0", "a/b/c"});

  ListingQuery reserved;
  reserved.allow_reserved = true;
  reserved.limit = 1;
  CHECK(s.names("c", reserved) == Names{std::string("\0x", 2)});
}

TEST_CASE("container rows in an account: newest timestamps win and counts move with them") {
  Store s(DbType::kAccount);
  s.create("acct");
  auto put = [&](const char* name, const char* put_ts, const char* del_ts, int64_t count,
                 int64_t bytes, int policy = 0) {
    ContainerRecord r;
    r.name = name;
    r.put_timestamp = put_ts;
    r.delete_timestamp = del_ts;
    r.object_count = count;
    r.bytes_used = bytes;
    r.storage_policy_index = policy;
    r.deleted = std::string(del_ts) > put_ts && count == 0;
    REQUIRE(s.store->merge_containers("acct", {r}).ok());
  };
  put("c1", "1700000001.00000", "0", 3, 30);
  put("c2", "1700000001.00000", "0", 1, 10, 1);
  DbInfo i = s.info("acct");
  CHECK(i.container_count == 2);
  CHECK(i.object_count == 4);
  CHECK(i.policy_stats[1].bytes_used == 10);
  // A stale report keeps the newer put timestamp but takes the new counts, as Swift does.
  put("c1", "1700000000.00000", "0", 5, 50);
  i = s.info("acct");
  CHECK(i.object_count == 6);
  put("c1", "1700000001.00000", "1700000002.00000", 0, 0);
  i = s.info("acct");
  CHECK(i.container_count == 1);
  CHECK(i.object_count == 1);
  auto listed = s.store->list_containers("acct", ListingQuery{});
  REQUIRE(listed.ok());
  const auto& rows = *listed;
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].row.name == "c2");

  // A report from before the DELETE (its updater read the container earlier) does not bring
  // the container back with its old count; a report of a newer PUT does.
  put("c1", "1700000001.00000", "0", 5, 50);
  i = s.info("acct");
  CHECK(i.container_count == 1);
  CHECK(i.object_count == 1);
  put("c1", "1700000003.00000", "1700000002.00000", 2, 20);
  i = s.info("acct");
  CHECK(i.container_count == 2);
  CHECK(i.object_count == 3);
}

TEST_CASE("random row updates keep counts equal to the rows") {
  Store s;
  s.create("c");
  std::mt19937 rng(7);
  std::map<std::string, std::pair<int64_t, int64_t>> model;  // name -> (ts, size), size<0: deleted
  for (int i = 0; i < 2000; ++i) {
    std::string name = "o" + std::to_string(rng() % 50);
    int64_t ts = 1700000000 + static_cast<int64_t>(rng() % 1000);
    bool del = rng() % 3 == 0;
    int64_t size = del ? 0 : static_cast<int64_t>(rng() % 100);
    s.put("c", name, std::to_string(ts) + ".00000", size, del);
    auto it = model.find(name);
    if (it == model.end() || ts > it->second.first) model[name] = {ts, del ? -1 : size};
  }
  int64_t count = 0, bytes = 0;
  for (const auto& [name, v] : model) {
    if (v.second >= 0) {
      ++count;
      bytes += v.second;
    }
  }
  DbInfo i = s.info("c");
  CHECK(i.container_objects() == count);
  CHECK(i.container_bytes() == bytes);
  CHECK(static_cast<int64_t>(s.names("c", ListingQuery{}).size()) == count);
}

TEST_CASE("reclaim drops old tombstones, emptied metadata and dead databases") {
  Store s;
  s.create("c");
  s.put("c", "old", "1600000000.00000", 0, /*deleted=*/true);
  s.put("c", "new", "1800000000.00000", 0, /*deleted=*/true);
  s.put("c", "live", "1600000000.00000", 7);
  REQUIRE(s.store
              ->update_info("c",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info->metadata["X-Container-Meta-Gone"] = {"", "1600000000.00000"};
                              info->metadata["X-Container-Meta-Kept"] = {"v", "1600000000.00000"};
                              return true;
                            })
              .ok());
  CHECK(s.info("c").tombstones == 2);
  std::string hash_before = s.info("c").hash;
  auto removed = s.store->reclaim("c", "1700000000.00000");
  REQUIRE(removed.ok());
  CHECK(*removed == 1);
  DbInfo i = s.info("c");
  CHECK(i.tombstones == 1);
  CHECK(i.container_objects() == 1);
  CHECK(i.hash != hash_before);  // the row's MD5 left the hash, as Swift's delete trigger does
  CHECK(i.metadata.count("X-Container-Meta-Gone") == 0);
  CHECK(i.metadata.count("X-Container-Meta-Kept") == 1);

  // A deleted, empty database past reclaim_age goes entirely.
  s.create("dead");
  REQUIRE(s.store
              ->update_info("dead",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info->put_timestamp = "1600000000.00000";
                              info->delete_timestamp = "1600000001.00000";
                              info->status = "DELETED";
                              return true;
                            })
              .ok());
  REQUIRE(s.store->reclaim("dead", "1700000000.00000").ok());
  auto gone = s.store->get_info("dead");
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());
}

TEST_CASE_FIXTURE(Store, "objects_since walks rows in ROWID order with tombstones and policies") {
  create("c");
  put("c", "b", "1700000001.00000");
  put("c", "a", "1700000002.00000");
  put("c", "p1", "1700000003.00000", 5, false, 1);
  put("c", "b", "1700000004.00000", 0, /*deleted=*/true);  // rewritten: a new ROWID
  auto all = store->objects_since("c", -1, 100);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);  // b's old row is gone with its sequence entry
  CHECK((*all)[0].name == "a");
  CHECK((*all)[0].rowid == 2);
  CHECK_FALSE((*all)[0].deleted);
  CHECK((*all)[1].name == "p1");
  CHECK((*all)[1].storage_policy_index == 1);
  CHECK((*all)[1].size == 5);
  CHECK((*all)[2].name == "b");
  CHECK((*all)[2].rowid == 4);
  CHECK((*all)[2].deleted);
  CHECK((*all)[2].created_at == "1700000004.00000");
  CHECK(info("c").max_row == 4);

  auto after = store->objects_since("c", 2, 100);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 2);
  CHECK((*after)[0].rowid == 3);
  auto one = store->objects_since("c", 0, 1);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].name == "a");
  auto none = store->objects_since("c", 4, 100);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(store->objects_since("missing", -1, 10).status().code() ==
        apus::common::Status::Code::kNotFound);
}

TEST_CASE_FIXTURE(Store, "objects_since stays inside its own database") {
  // "c" is a prefix of "c2": the varint length in the key keeps their sequences apart.
  create("c");
  create("c2");
  put("c2", "x", "1700000001.00000");
  put("c", "y", "1700000002.00000");
  put("c2", "z", "1700000003.00000");
  auto c = store->objects_since("c", -1, 100);
  REQUIRE(c.ok());
  REQUIRE(c->size() == 1);
  CHECK((*c)[0].name == "y");
  auto c2 = store->objects_since("c2", -1, 100);
  REQUIRE(c2.ok());
  REQUIRE(c2->size() == 2);
  CHECK((*c2)[1].name == "z");
}

TEST_CASE_FIXTURE(Store, "set_sync_points sets either point while Sync-To is unchanged") {
  create("c");
  REQUIRE(store
              ->update_info("c",
                            [](std::optional<DbInfo>& i) -> Result<bool> {
                              i->metadata["X-Container-Sync-To"] = {"//r/c/a/d", "1"};
                              return true;
                            })
              .ok());
  CHECK(info("c").x_container_sync_point1 == -1);
  REQUIRE(store->set_sync_points("c", "//r/c/a/d", 6, std::nullopt).ok());
  CHECK(info("c").x_container_sync_point1 == 6);
  CHECK(info("c").x_container_sync_point2 == -1);
  REQUIRE(store->set_sync_points("c", "//r/c/a/d", std::nullopt, 3).ok());
  CHECK(info("c").x_container_sync_point1 == 6);
  CHECK(info("c").x_container_sync_point2 == 3);
  // Another Sync-To (the server reset the points): nothing is written.
  CHECK(store->set_sync_points("c", "//r/c/a/other", 9, 9).code() ==
        apus::common::Status::Code::kConflict);
  CHECK(info("c").x_container_sync_point1 == 6);
  CHECK(store->set_sync_points("missing", "x", 1, 1).code() ==
        apus::common::Status::Code::kNotFound);
}

TEST_CASE("remove_db_if_unchanged: a change without a new row keeps the database") {
  Store s;
  s.create("c");
  s.put("c", "o", "1700000001.00000");
  DbInfo copied = s.info("c");
  // A POST's metadata: no new row, max_row and id as they were.
  REQUIRE(s.store
              ->update_info("c",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info->metadata["X-Container-Meta-A"] = {"b", "1700000002.00000"};
                              return true;
                            })
              .ok());
  CHECK(s.store->remove_db_if_unchanged("c", copied).code() ==
        apus::common::Status::conflict().code());
  CHECK(s.store->get_info("c")->has_value());
  CHECK(s.store->remove_db_if_unchanged("c", s.info("c")).ok());
  CHECK_FALSE(s.store->get_info("c")->has_value());
  CHECK(s.store->list_objects("c", ListingQuery()).status().is_not_found());
  CHECK(s.store->remove_db_if_unchanged("c", copied).is_not_found());
}

TEST_CASE("reconciler_sync_point: kept in the info record, -1 until set") {
  Store s;
  s.create("c");
  CHECK(s.info("c").reconciler_sync_point == -1);
  REQUIRE(s.store
              ->update_info("c",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info->reconciler_sync_point = 42;
                              return true;
                            })
              .ok());
  CHECK(s.info("c").reconciler_sync_point == 42);
}

namespace {

ObjectRecord row(const std::string& name, const std::string& ts) {
  ObjectRecord r;
  r.name = name;
  r.created_at = ts;
  r.size = 1;
  r.content_type = "text/plain";
  r.etag = "e";
  return r;
}

bool would_wait(const Status& s) { return s.code() == Status::Code::kUnavailable; }

}  // namespace

TEST_CASE_FIXTURE(Store, "Waiting::kNever merges a row that needs no wait, as kMay does") {
  create("c");
  REQUIRE(store->merge_objects("c", {row("o", "1700000001.00000")}, nullptr,
                               WalSync::kUnsynced, Waiting::kNever)
              .ok());
  CHECK(info("c").container_objects() == 1);
  CHECK(names("c", ListingQuery{}) == Names{"o"});
  // Swift's rules hold as for any merge: an older row changes nothing, a missing database is
  // NotFound (not a reason to wait).
  REQUIRE(store->merge_objects("c", {row("o", "1700000000.50000")}, nullptr,
                               WalSync::kUnsynced, Waiting::kNever)
              .ok());
  CHECK(info("c").max_row == 1);
  Status missing = store->merge_objects("nodb", {row("o", "1700000001.00000")}, nullptr,
                                        WalSync::kUnsynced, Waiting::kNever);
  CHECK(missing.code() == Status::Code::kNotFound);
}

TEST_CASE("Waiting::kNever gives up, writing nothing, where the row would wait") {
  apus::test::TempDir dir("apus_listing_nowait");
  StoreOptions o;
  o.sync_writes = true;
  auto opened = ListingStore::open(dir.path("db"), o);
  REQUIRE(opened.ok());
  std::unique_ptr<ListingStore> store = std::move(*opened);
  REQUIRE(store
              ->update_info("c",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info.emplace();
                              info->put_timestamp = "1700000000.00000";
                              info->policy_stats[0];
                              return true;
                            })
              .ok());
  auto objects = [&] { return (*store->get_info("c"))->container_objects(); };

  SUBCASE("a synced write (fsync) is never done") {
    CHECK(would_wait(store->merge_objects("c", {row("o", "1700000001.00000")}, nullptr,
                                          WalSync::kStore, Waiting::kNever)));
    CHECK(objects() == 0);
  }
  SUBCASE("the database's lock, held by another thread") {
    std::promise<void> holding, release;
    std::thread holder([&] {
      (void)store->update_info("c", [&](std::optional<DbInfo>&) -> Result<bool> {
        holding.set_value();
        release.get_future().wait();
        return false;
      });
    });
    holding.get_future().wait();
    Status s = store->merge_objects("c", {row("o", "1700000001.00000")}, nullptr,
                                    WalSync::kUnsynced, Waiting::kNever);
    release.set_value();
    holder.join();
    CHECK(would_wait(s));
    CHECK(objects() == 0);
  }
  SUBCASE("a read from disk: after a reopen the database is in a table file, not in memory") {
    store.reset();
    opened = ListingStore::open(dir.path("db"), o);  // the WAL's rows are flushed to a table
    REQUIRE(opened.ok());
    store = std::move(*opened);
    CHECK(would_wait(store->merge_objects("c", {row("o", "1700000001.00000")}, nullptr,
                                          WalSync::kUnsynced, Waiting::kNever)));
    CHECK(objects() == 0);  // this read (kMay) brings the blocks into RocksDB's cache...
    CHECK(store->merge_objects("c", {row("o", "1700000001.00000")}, nullptr,
                               WalSync::kUnsynced, Waiting::kNever)
              .ok());  // ...so the row needs no disk read now
    CHECK(objects() == 1);
  }
}
