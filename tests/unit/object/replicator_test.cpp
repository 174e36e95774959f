#include "object-server/replicator.h"

#include <doctest/doctest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

using apus::object::rsync_module_interpolation;

namespace {

// [object-replicator] sections read beside a swift.conf of their own.
struct ReplicatorConfigs {
  apus::test::TempDir dir{"apus_replicator"};
  ReplicatorConfigs() {
    std::ofstream(dir.path("swift.conf"))
        << "[swift-hash]\nswift_hash_path_suffix = s\n[storage-policy:0]\nname = gold\n";
  }
  apus::common::Result<apus::object::ReplicatorConfig> parse(const std::string& section) {
    return apus::object::ReplicatorConfig::from_config(
        apus::common::Config::parse("[DEFAULT]\nswift_dir = " + dir.path("") +
                                    "\n[object-replicator]\n" + section)
            .value());
  }
};

}  // namespace

TEST_CASE("rsync_module_interpolation fills in the device's values as Swift's does") {
  apus::ring::Device dev;
  dev.ip = "10.0.0.1";
  dev.port = 6200;
  dev.replication_ip = "fe80::1";
  dev.replication_port = 6300;
  dev.region = 2;
  dev.zone = 3;
  dev.device = "sdb1";
  dev.meta = "m";
  CHECK(rsync_module_interpolation("{replication_ip}::object", dev).value() ==
        "[fe80::1]::object");
  CHECK(rsync_module_interpolation("{ip}::object_{device}{port}", dev).value() ==
        "10.0.0.1::object_sdb16200");
  CHECK(rsync_module_interpolation("rsync://{ip}:873/r{region}z{zone}{meta}{replication_port}",
                                   dev)
            .value() == "rsync://10.0.0.1:873/r2z3m6300");
  CHECK(rsync_module_interpolation("{{literal}}", dev).value() == "{literal}");
  CHECK_FALSE(rsync_module_interpolation("{host}::object", dev).ok());
  CHECK_FALSE(rsync_module_interpolation("{ip::object", dev).ok());
  CHECK_FALSE(rsync_module_interpolation("ip}::object", dev).ok());
}

TEST_CASE("ReplicatorConfig: rsync by default as Swift, its options, ssync on request") {
  ReplicatorConfigs configs;
  auto parse = [&](const std::string& section) { return configs.parse(section); };
  auto c = parse("");
  REQUIRE(c.ok());
  CHECK(c->rsync_module == "{replication_ip}::object");
  CHECK(c->rsync.timeout == 900);
  CHECK(c->rsync.io_timeout == "30");
  CHECK(c->rsync.log_transfers);
  c = parse("rsync_module = rsync://{ip}:8873/object/\nvm_test_mode = yes\n"
            "rsync_bwlimit = 10M\nrsync_compress = on\n");
  REQUIRE(c.ok());
  CHECK(c->rsync_module == "rsync://{ip}:8873/object{replication_port}");
  CHECK(c->rsync.bwlimit == "10M");
  CHECK(c->rsync.compress);
  c = parse("sync_method = ssync\n");
  REQUIRE(c.ok());
  CHECK(c->rsync_module.empty());
  CHECK_FALSE(parse("sync_method = scp\n").ok());
  CHECK_FALSE(parse("rsync_module = {host}::object\n").ok());
  CHECK_FALSE(parse("rsync_io_timeout = 30; rm -rf /\n").ok());
}

TEST_CASE("ReplicatorConfig: ring_check_interval") {
  ReplicatorConfigs configs;
  auto parse = [&](const std::string& section) { return configs.parse(section); };
  CHECK(parse("").value().ring_check_interval == 15);
  CHECK(parse("ring_check_interval = 2.5\n").value().ring_check_interval == 2.5);
  CHECK_FALSE(parse("ring_check_interval = 0\n").ok());
}
