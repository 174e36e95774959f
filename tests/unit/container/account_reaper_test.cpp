#include "container-server/account_reaper.h"

#include <fstream>

#include <doctest/doctest.h>

#include "container-server/listing_db.h"
#include "tests/support/temp_dir.h"

using apus::common::Config;
using apus::common::Result;
using apus::container::ContainerRecord;
using apus::container::DbInfo;
using apus::container::DbType;
using apus::container::ListingQuery;
using apus::container::ListingStore;
using apus::container::reaper_container_shard;
using apus::container::ReaperConfig;
using apus::container::StoreOptions;

TEST_CASE("reaper_container_shard is Swift's int(md5(container).hexdigest(), 16) % n") {
  // Values from Python: int(md5(name.encode()).hexdigest(), 16) % n.
  CHECK(reaper_container_shard("alpha", 7) == 3);
  CHECK(reaper_container_shard("beta", 7) == 4);
  CHECK(reaper_container_shard("gamma", 11) == 7);
  CHECK(reaper_container_shard("\xc3\xa9t\xc3\xa9", 13) == 6);
  CHECK(reaper_container_shard(std::string(300, 'x'), 5) == 1);
  CHECK(reaper_container_shard("c", 1000003) == 306525);
  CHECK(reaper_container_shard("anything", 1) == 0);
}

TEST_CASE("ReaperConfig reads [account-reaper] with Swift's defaults") {
  apus::test::TempDir dir("apus_reaper");
  std::ofstream(dir.path("swift.conf"))
      << "[swift-hash]\nswift_hash_path_suffix = s\n[storage-policy:0]\nname = gold\n";
  auto parse = [&](const std::string& section) {
    return ReaperConfig::from_config(
        Config::parse("[DEFAULT]\nswift_dir = " + dir.path("") + "\nbind_port = 6012\n" +
                      "[account-reaper]\n" + section)
            .value());
  };
  Result<ReaperConfig> c = parse("");
  REQUIRE(c.ok());
  CHECK(c->interval == 3600);
  CHECK(c->concurrency == 25);
  CHECK(c->delay_reaping == 0);
  CHECK(c->reap_warn_after == 2592000);
  CHECK(c->bind_port == 6012);
  CHECK(c->log_name == "account-reaper");
  c = parse("delay_reaping = 604800\nreap_warn_after =\nconcurrency = 4\n");
  REQUIRE(c.ok());
  CHECK(c->delay_reaping == 604800);
  CHECK(c->reap_warn_after == 2592000);  // empty: the default, as Swift's `or`
  CHECK(c->concurrency == 4);
  CHECK_FALSE(parse("concurrency = 0\n").ok());
  CHECK_FALSE(parse("delay_reaping = soon\n").ok());
  CHECK_FALSE(parse("interval = 0\n").ok());
}

TEST_CASE("a follower reads the server's store and catches up with its writes") {
  apus::test::TempDir dir("apus_follower");
  StoreOptions options;
  options.type = DbType::kAccount;
  options.sync_writes = false;
  auto server = ListingStore::open(dir.path("db"), options).value();
  REQUIRE(server
              ->update_info("0/acct",
                            [](std::optional<DbInfo>& info) -> Result<bool> {
                              info.emplace();
                              info->account = "AUTH_a";
                              info->put_timestamp = "1700000000.00000";
                              return true;
                            })
              .ok());
  auto put = [&](const char* name) {
    ContainerRecord r;
    r.name = name;
    r.put_timestamp = "1700000001.00000";
    REQUIRE(server->merge_containers("0/acct", {r}).ok());
  };
  put("c1");
  auto follower = ListingStore::open_follower(dir.path("db"), dir.path("scratch"), options);
  REQUIRE(follower.ok());
  ListingStore& f = **follower;
  auto names = [&] {
    std::vector<std::string> out;
    auto listed = f.list_containers("0/acct", ListingQuery{});
    REQUIRE(listed.ok());
    for (const auto& e : *listed) out.push_back(e.row.name);
    return out;
  };
  CHECK(names() == std::vector<std::string>{"c1"});
  put("c2");
  CHECK(names() == std::vector<std::string>{"c1"});  // not before catch_up()
  REQUIRE(f.catch_up().ok());
  CHECK(names() == std::vector<std::string>{"c1", "c2"});
  auto infos = f.list_infos("", 10);
  REQUIRE(infos.ok());
  REQUIRE(infos->size() == 1);
  CHECK((*infos)[0].second.container_count == 2);
  // Writes are the server's alone.
  CHECK_FALSE(f.merge_containers("0/acct", {ContainerRecord{.name = "c3"}}).ok());
  CHECK(server->get_info("0/acct").value()->container_count == 2);
}
