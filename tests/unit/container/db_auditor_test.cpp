// The DB auditors' check: a store's recount of a database's rows against its info.
#include "container-server/db_auditor.h"

#include <doctest/doctest.h>

#include "container-server/listing_db.h"
#include "tests/support/temp_dir.h"

using apus::common::Result;
using apus::container::audit_problem;
using apus::container::ContainerRecord;
using apus::container::DbInfo;
using apus::container::DbType;
using apus::container::ListingStore;
using apus::container::ObjectRecord;
using apus::container::StoreOptions;

namespace {

struct Audited : apus::test::TempDir {
  std::unique_ptr<ListingStore> store;
  DbType type;
  explicit Audited(DbType t) : TempDir("apus_db_audit"), type(t) {
    StoreOptions o;
    o.type = t;
    o.sync_writes = false;
    store = ListingStore::open(path("db"), o).value();
    REQUIRE(store
                ->update_info("0/db",
                              [](std::optional<DbInfo>& info) -> Result<bool> {
                                info.emplace();
                                info->account = "a";
                                info->container = "c";
                                info->put_timestamp = "1700000000.00000";
                                info->policy_stats[0];
                                return true;
                              })
                .ok());
  }
  std::string problem() {
    auto audit = store->audit_rows("0/db");
    REQUIRE(audit.ok());
    return audit_problem(*audit, type);
  }
  // Changes the info behind the rows' back, as a bug or a bad disk could.
  void tamper(const std::function<void(DbInfo&)>& change) {
    REQUIRE(store
                ->update_info("0/db",
                              [&](std::optional<DbInfo>& info) -> Result<bool> {
                                change(*info);
                                return true;
                              })
                .ok());
  }
};

ObjectRecord object(const std::string& name, int64_t size, bool deleted, int policy) {
  ObjectRecord r;
  r.name = name;
  r.created_at = "1700000001.00000";
  r.size = size;
  r.content_type = "text/plain";
  r.etag = "e";
  r.deleted = deleted;
  r.storage_policy_index = policy;
  return r;
}

}  // namespace

TEST_CASE("a container's counts, tombstones and hash are audited against its rows") {
  Audited a(DbType::kContainer);
  REQUIRE(a.store->merge_objects("0/db", {object("x", 5, false, 0), object("y", 7, false, 1),
                                          object("z", 0, true, 0)})
              .ok());
  auto audit = a.store->audit_rows("0/db");
  REQUIRE(audit.ok());
  CHECK(audit->rows == 3);
  CHECK(audit->tombstones == 1);
  CHECK(audit->sequence_entries == 3);
  CHECK(audit->stats[0].object_count == 1);
  CHECK(audit->stats[1].bytes_used == 7);
  CHECK(a.problem().empty());
  a.tamper([](DbInfo& i) { i.policy_stats[1].bytes_used = 8; });
  CHECK(a.problem() == "bytes used of policy 1 8 where the rows add up to 7");
  a.tamper([](DbInfo& i) {
    i.policy_stats[1].bytes_used = 7;
    i.hash = std::string(32, 'f');
  });
  CHECK(a.problem().rfind("hash ffff", 0) == 0);
  CHECK_FALSE(a.store->audit_rows("0/none")->info.has_value());
}

TEST_CASE("an account's totals must be the sums over policies, as Swift's auditor checks") {
  Audited a(DbType::kAccount);
  ContainerRecord c{.name = "c1", .put_timestamp = "1700000001.00000", .object_count = 3,
                    .bytes_used = 30};
  REQUIRE(a.store->merge_containers("0/db", {c}).ok());
  CHECK(a.problem().empty());
  a.tamper([](DbInfo& i) { i.object_count = 4; });
  CHECK(a.problem() ==
        "The total object_count for the account (4) does not match the sum of object_count "
        "across policies (3)");
  a.tamper([](DbInfo& i) {
    i.object_count = 3;
    i.policy_stats[0].container_count = 2;
    i.container_count = 2;
  });
  CHECK(a.problem() == "container count of policy 0 2 where the rows add up to 1");
}

TEST_CASE("verify_checksums passes on a sound store") {
  Audited a(DbType::kContainer);
  REQUIRE(a.store->merge_objects("0/db", {object("x", 5, false, 0)}).ok());
  CHECK(a.store->verify_checksums().ok());
}
